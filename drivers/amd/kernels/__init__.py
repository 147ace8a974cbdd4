"""Code objects shipped with hcq as package data (built by tests/amd/build_kernels.py from demo.cl with clang-19):
`demo.hsaco` with the kernels empty, vadd and matmul, used by `hcq demo` and bench/launch.py."""
import pkgutil


def demo_code_object() -> bytes:
  data = pkgutil.get_data(__package__, "demo.hsaco")
  if data is None: raise FileNotFoundError(f"{__package__}: demo.hsaco is missing from the installation")
  return data
