"""The demo's kernels for the CPU (`hcq demo --device CPU`), written with the compiler's DSL and built by its C
backend: the same two jobs, argument lists and launch sizes as AMD's demo code object (drivers/amd/kernels) and NV's
PTX (drivers/nv/demo.py), so that the demo launches all of them alike.

  vadd(n):   kernel (a, b, c, n)          c[i] = a[i] + b[i] for i < n; work-groups of VADD_LOCAL items
  matmul(m): kernel (x, y, z, M, N, K)    z = x @ y, row-major M x K times K x N, for M, N, K <= m;
             MATMUL_TILE x MATMUL_TILE work-groups (x: columns, y: rows)
A kernel's launch grid is a constant of its build (the compiler's SPECIALs take constant sizes), so each is built for
the largest size it serves; the sizes passed at launch gate the work-items past the edge (they store nothing)."""
from __future__ import annotations

from ...compiler.ir import AxisType, KernelInfo, UOp, dtypes

VADD_LOCAL = 256
MATMUL_TILE = 16


def _groups(n: int, size: int) -> int: return (n + size - 1) // size


def vadd(n: int) -> UOp:
  a, b = (UOp.param(s, dtypes.float32, n, readonly=True) for s in (0, 1))
  c = UOp.param(2, dtypes.float32, n)
  count = UOp.variable("n", 0, n, slot=3)
  i = UOp.special(_groups(n, VADD_LOCAL), "gidx0") * VADD_LOCAL + UOp.special(VADD_LOCAL, "lidx0")
  ok = i < count
  return c.index(i).valid(ok).store(a.index(i).valid(ok).load() + b.index(i).valid(ok).load()).sink(arg=KernelInfo("vadd"))


def matmul(m: int) -> UOp:
  rows, cols, inner = (UOp.variable(name, 0, m, slot=s) for name, s in (("M", 3), ("N", 4), ("K", 5)))
  x, y = (UOp.param(s, dtypes.float32, m * m, readonly=True) for s in (0, 1))
  z = UOp.param(2, dtypes.float32, m * m)
  col = UOp.special(_groups(m, MATMUL_TILE), "gidx0") * MATMUL_TILE + UOp.special(MATMUL_TILE, "lidx0")
  row = UOp.special(_groups(m, MATMUL_TILE), "gidx1") * MATMUL_TILE + UOp.special(MATMUL_TILE, "lidx1")
  ok = (row < rows) & (col < cols)
  r = UOp.range(inner, 0, AxisType.REDUCE)
  acc = (x.index(row * inner + r).valid(ok).load() * y.index(r * cols + col).valid(ok).load()).reduce(r)
  return z.index(row * cols + col).valid(ok).store(acc).sink(arg=KernelInfo("matmul"))
