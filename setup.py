"""hcq: userspace drivers for GPU and RDMA NIC command queues.

The repository root *is* the package: setup.py maps the root folders under the import name ``hcq`` so that
generic names (``compiler``, ``drivers``) never land in site-packages on their own.
"""
import os
from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT_PACKAGES = ["autogen", "cli", "compiler", "drivers", "mockgpu", "smi"]


def find_subpackages():
  pkgs = ["hcq"]
  for top in ROOT_PACKAGES:
    for dirpath, dirnames, filenames in os.walk(os.path.join(HERE, top)):
      dirnames[:] = [d for d in dirnames if not d.startswith((".", "__"))]
      if "__init__.py" in filenames:
        rel = os.path.relpath(dirpath, HERE)
        pkgs.append("hcq." + rel.replace(os.sep, "."))
  return pkgs


class BuildPy(build_py):
  """The root folder is the package: its root modules are hcq's (config, errors, __init__), never this script."""

  def find_package_modules(self, package, package_dir):
    return [m for m in super().find_package_modules(package, package_dir) if not (package == "hcq" and m[1] == "setup")]


setup(
  name="hcq",
  cmdclass={"build_py": BuildPy},
  version="0.1.0",
  description="Drive GPU and RDMA NIC command queues directly from userspace",
  python_requires=">=3.11",
  package_dir={"hcq": "."},
  packages=find_subpackages(),
  package_data={"hcq": ["autogen/*.json", "autogen/*/*.json", "mockgpu/fixtures/*", "drivers/amd/kernels/*.hsaco", "drivers/amd/kernels/*.cl", "mockgpu/*/fixtures/*", "docs/*.md", "README.md", "drivers/*/README.md", "drivers/*/*/README.md", "compiler/README.md", "autogen/README.md", "mockgpu/*/README.md"]},
  install_requires=["numpy>=1.24", "pyusb>=1.2", "ioctl-opt>=1.3", "msgpack>=1.0", "tqdm>=4.60"],
  extras_require={"test": ["pytest>=7", "pytest-xdist>=3", "hypothesis>=6", "libclang==18.1.1", "tinygrad==0.14.0"], "plot": ["matplotlib>=3.5"]},
  entry_points={"console_scripts": ["hcq=hcq.cli:main", "hcq-smi=hcq.smi:main"]},
)
