"""`hcq demo`'s kernels written with the DSL, for devices without a code object of their own (gfx1200, gfx942, the
CPU): the same arguments and launch shapes as drivers/amd/kernels/demo.cl, sizes known only at launch.

    vadd(a, b, c, n)              c[i] = a[i] + b[i] for i < n; work-groups of 256 along x
    matmul(a, b, c, m, n, k)      c[m x n] = a[m x k] @ b[k x n], row-major; 16x16 work-groups, one work-item per c
"""
from __future__ import annotations

from .ir import AxisType, KernelInfo, UOp, dtypes

MAX_ELEMS = 1 << 26     # the largest vector (and matrix side product) the kernels address
MAX_SIDE = 1 << 13      # the largest matrix side


def vadd_sink() -> UOp:
  n = UOp.variable("n", 0, MAX_ELEMS, slot=3)
  a, b = UOp.param(0, dtypes.float32, n, readonly=True), UOp.param(1, dtypes.float32, n, readonly=True)
  c = UOp.param(2, dtypes.float32, n)
  i = UOp.special(MAX_ELEMS // 256, "gidx0") * 256 + UOp.special(256, "lidx0")
  ok = i < n
  return c.index(i).valid(ok).store(a.index(i).valid(ok).load() + b.index(i).valid(ok).load()) \
    .sink(arg=KernelInfo("vadd"))


def matmul_sink() -> UOp:
  m, n, k = (UOp.variable(name, 0, MAX_SIDE, slot=s) for name, s in (("m", 3), ("n", 4), ("k", 5)))
  a = UOp.param(0, dtypes.float32, m * k, readonly=True)
  b = UOp.param(1, dtypes.float32, k * n, readonly=True)
  c = UOp.param(2, dtypes.float32, m * n)
  col = UOp.special(MAX_SIDE // 16, "gidx0") * 16 + UOp.special(16, "lidx0")
  row = UOp.special(MAX_SIDE // 16, "gidx1") * 16 + UOp.special(16, "lidx1")
  ok = (row < m) & (col < n)
  i = UOp.range(k, 0, AxisType.REDUCE)
  acc = (a.index(row * k + i).valid(ok).load() * b.index(i * n + col).valid(ok).load()).reduce(i)
  return c.index(row * n + col).valid(ok).store(acc).sink(arg=KernelInfo("matmul"))
