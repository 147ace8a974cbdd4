"""float -> integer conversions at the edges (NaN, +-inf, out of range, -0.5, huge f16): the RDNA3 backend's code on the
emulator (v_cvt_i32_f32 / v_cvt_u32_f32, then narrowing) and its constant folding (the same casts of constants) give
what the C backend gives, which is the reference conversion compiler/ir/dtypes.float_to_int (NaN -> 0, saturating)."""
from __future__ import annotations

import numpy as np
import pytest

from amd_reference import run_c, run_gfx1100
from hcq.compiler import KernelInfo, UOp, dtypes
from hcq.compiler.ir.dtypes import float_to_int, truncate

EDGES = [np.nan, -np.nan, np.inf, -np.inf, 3e9, -3e9, 5e9, -5e9, 2147483520.0, -2147483648.0, 4294967040.0, 1e30,
         -1e30, -0.5, -1.0, -1.5, 0.0, -0.0, 2.75, -2.75, 65535.9, 65536.5, -32768.9, 255.5, 256.0, -129.9, 1e-30, 7.0]
TARGETS = [dtypes.int32, dtypes.uint32, dtypes.int16, dtypes.uint16, dtypes.int8, dtypes.uint8]
N = 32


def _case(src_dtype, np_src):
  with np.errstate(over="ignore"):   # 3e9 and beyond are inf in f16: edges too
    x = np.array(EDGES + [1.0] * (N - len(EDGES)), np_src)
  outs = [np.zeros(N, np.uint32 if t.kind == "uint" else np.int32) for t in TARGETS]
  folded = [np.zeros(len(EDGES), o.dtype) for o in outs]
  X = UOp.param(0, src_dtype, N, readonly=True)
  O = [UOp.param(1 + k, dtypes.from_numpy(o.dtype), N) for k, o in enumerate(outs)]
  F = [UOp.param(1 + len(outs) + k, dtypes.from_numpy(o.dtype), len(EDGES)) for k, o in enumerate(folded)]
  i = UOp.special(N, "lidx0")
  v = X.index(i).load()
  wide = [dtypes.uint32 if t.kind == "uint" else dtypes.int32 for t in TARGETS]
  stores = [o.index(i).store(v.cast(t).cast(w)) for o, t, w in zip(O, TARGETS, wide)]
  for f, t, w in zip(F, TARGETS, wide):   # the same conversions of constants: folded at compile time
    for j, e in enumerate(EDGES):
      c = UOp.const(float(x[j]), src_dtype)
      stores.append(f.index(UOp.const(j, dtypes.int32)).store(c.cast(t).cast(w)))
  sink = UOp.sink(*stores, arg=KernelInfo(f"f2i_{src_dtype.name}"))
  return sink, [x, *outs, *folded], x


@pytest.mark.tools("cc")
@pytest.mark.parametrize("src_dtype,np_src", [(dtypes.float32, np.float32), (dtypes.float16, np.float16)],
                         ids=["f32", "f16"])
def test_float_to_int_edges_match_the_c_backend(src_dtype, np_src):
  sink, args, x = _case(src_dtype, np_src)
  ref = run_c(sink, args, (1, 1, 1), (N, 1, 1))
  got, _, _ = run_gfx1100(sink, args, (1, 1, 1), (N, 1, 1))
  for k, t in enumerate(TARGETS):
    want = np.array([truncate(float_to_int(float(e), t), t) for e in x], ref[1 + k].dtype)
    np.testing.assert_array_equal(ref[1 + k], want, err_msg=f"C backend {src_dtype.name} -> {t.name} vs float_to_int")
    np.testing.assert_array_equal(got[1 + k], ref[1 + k], err_msg=f"gfx1100 code {src_dtype.name} -> {t.name}")
    f = 1 + len(TARGETS) + k
    np.testing.assert_array_equal(ref[f], want[:len(EDGES)], err_msg=f"C backend folded {src_dtype.name} -> {t.name}")
    np.testing.assert_array_equal(got[f], ref[f], err_msg=f"gfx1100 folded {src_dtype.name} -> {t.name}")


@pytest.mark.tools("cc")
@pytest.mark.parametrize("src_dtype,np_src", [(dtypes.float32, np.float32), (dtypes.float16, np.float16)],
                         ids=["f32", "f16"])
def test_instruction_selection_folds_casts_of_known_values_like_the_c_backend(src_dtype, np_src):
  """A cast whose source the selector already knows (a value it folded itself, not a CONST chain the lowering folds)
  goes through ISel.cast's constant path: the same results as the C backend's code for those inputs."""
  from hcq.compiler.backend.amd.isel import ISel
  from hcq.compiler.backend.amd.isel_common import imm_of, value_of
  from hcq.compiler.backend.amd.render import GFX1100_TARGET
  from hcq.compiler.ir import Ops
  from hcq.compiler.lower import lower
  sink, args, x = _case(src_dtype, np_src)
  ref = run_c(sink, args, (1, 1, 1), (N, 1, 1))
  isel = ISel(lower(sink, GFX1100_TARGET))
  for k, t in enumerate(TARGETS):
    for j, e in enumerate(x[:len(EDGES)]):
      known = UOp.const(0.0, src_dtype)     # stands for any value the selector has folded to this constant
      isel.val[known] = imm_of(float(e), src_dtype)
      got = value_of(isel.cast(UOp(Ops.CAST, (known,), t)), t)
      assert got == ref[1 + k][j], f"{src_dtype.name} {e!r} -> {t.name}: folded {got}, C backend {ref[1 + k][j]}"
