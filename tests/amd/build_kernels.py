"""Build drivers/amd/kernels/demo.hsaco from demo.cl with clang-19 and ld.lld-19 (gfx1100, code object v5):
    python tests/amd/build_kernels.py [TARGET [OUT]]
The result is committed as package data so that hcq needs no compiler at run time."""
import os
import subprocess
import sys
import tempfile

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "drivers", "amd", "kernels")


def build(target: str = "gfx1100", out: str | None = None) -> str:
  out = out or os.path.join(HERE, "demo.hsaco")
  with tempfile.TemporaryDirectory() as tmp:
    obj = os.path.join(tmp, "demo.o")
    subprocess.run(["clang-19", "-x", "cl", "-cl-std=CL2.0", "-target", "amdgcn-amd-amdhsa", f"-mcpu={target}",
                    "-nogpulib", "-O2", "-c", os.path.join(HERE, "demo.cl"), "-o", obj], check=True)
    subprocess.run(["ld.lld-19", "-shared", obj, "-o", out], check=True)
  return out


if __name__ == "__main__":
  print(build(*sys.argv[1:]))
