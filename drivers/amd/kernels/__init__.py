"""Code objects shipped with hcq as package data (built by tests/amd/build_kernels.py from demo.cl with clang-19):
`demo.hsaco` with the kernels empty, vadd and matmul, used by `hcq demo` and bench/launch.py."""
from importlib import resources


def demo_code_object() -> bytes:
  return resources.files(__package__).joinpath("demo.hsaco").read_bytes()
