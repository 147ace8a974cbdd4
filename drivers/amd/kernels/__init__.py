"""Code objects shipped with hcq (built by build.py from demo.cl): `demo.hsaco` with the kernels empty, vadd and
matmul, used by `hcq demo` and bench/launch.py."""
import os

HERE = os.path.dirname(os.path.abspath(__file__))
DEMO = os.path.join(HERE, "demo.hsaco")


def demo_code_object() -> bytes:
  with open(DEMO, "rb") as f: return f.read()
