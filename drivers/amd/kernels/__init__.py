"""Code objects shipped with hcq (built by build.py from demo.cl): `demo.hsaco` with the kernels empty, vadd and
matmul, used by `hcq demo` and bench/launch.py. Read as package data (importlib.resources), not device access."""
from importlib import resources


def demo_code_object() -> bytes:
  return resources.files(__package__).joinpath("demo.hsaco").read_bytes()
