"""Scalar (SGPR) paths of the RDNA3 backend: loads of values every lane shares go through s_load, and a kernel that
needs more SGPRs than gfx1100 has still runs (its SGPRs spilled to VGPR lanes). Kernels run on MOCK+AMD and on the
CPU (C backend) against numpy."""
from __future__ import annotations

import re

import numpy as np
import pytest

import hcq
from amd_reference import objdump, run_c
from hcq.compiler import KernelInfo, UOp, compile as hcq_compile, dtypes

pytestmark = pytest.mark.tools("cc", "llvm-objdump-19")

G, L = 4, 32


def _p(slot, arr, readonly=True):
  return UOp.param(slot, dtypes.from_numpy(arr.dtype), arr.size, readonly=readonly)


@pytest.fixture(scope="module", params=["gfx1100", "gfx1200", "gfx942"])
def mock_amd(request):
  """MOCK+AMD posing as each AMD target the backend compiles for (HCQ_MOCK_GPU): the same kernels on all three."""
  import dataclasses

  from hcq.config import from_env
  with hcq.open("MOCK+AMD", dataclasses.replace(from_env(), mock_gpu=request.param)) as d: yield d


def _run_both(dev, sink, args, outputs, grid=(G, 1, 1), block=(L, 1, 1)):
  prog = dev.compile(sink)
  bufs = []
  for a in args:
    if isinstance(a, np.ndarray):
      b = dev.alloc(max(a.nbytes, 4))
      dev.copyin(b, a.tobytes())
      bufs.append(b)
    else: bufs.append(a)
  prog(*bufs, global_size=grid, local_size=block, wait=True)
  got = {s: np.frombuffer(dev.copyout(bufs[s])[:args[s].nbytes], args[s].dtype) for s in outputs}
  ref = run_c(sink, args, grid, block)
  return got, {s: ref[s] for s in outputs}


def uniform_loads_kernel():
  rng = np.random.default_rng(30)
  x = rng.standard_normal(G * L).astype(np.float32)
  w = rng.standard_normal(G).astype(np.float32)          # one weight per work-group: w[gidx]
  t = np.array([3, 0, 2, 1, 7, 5, 6, 4], np.int32)       # t[t[gidx]]: a uniform index read from memory
  big = rng.integers(-2**62, 2**62, 8, dtype=np.int64)
  scratch = np.arange(2 * G, dtype=np.float32)          # written by the kernel (at G + gidx): its loads stay vector
  out, out_i = np.zeros(G * L, np.float32), np.zeros(G * L, np.int64)
  X, W, T, B = _p(0, x), _p(1, w), _p(2, t), _p(3, big)
  S, O, OI = _p(4, scratch, False), _p(5, out, False), _p(6, out_i, False)
  gi, li = UOp.special(G, "gidx0"), UOp.special(L, "lidx0")
  i = gi * L + li
  chase = T.index(T.index(gi).load()).load()            # t[t[g]]
  v = X.index(i).load() * W.index(gi).load() + W.index(3).load() + S.index(gi).load()
  vi = B.index(gi + 1).load() + (chase * 5 + T.index(6).load()).cast(dtypes.int64)
  sink = UOp.sink(O.index(i).store(v), OI.index(i).store(vi), S.index(gi + G).store(W.index(gi).load()),
                  arg=KernelInfo("uniform_loads"))
  g = np.repeat(np.arange(G), L)
  want_v = x * w[g] + w[3] + scratch[g]
  want_i = big[g + 1] + (t[t[g]] * 5 + t[6]).astype(np.int64)
  return sink, [x, w, t, big, scratch, out, out_i], {4: np.concatenate([scratch[:G], w]), 5: want_v, 6: want_i}


def test_uniform_loads_are_scalar_and_correct(mock_amd):
  sink, args, want = uniform_loads_kernel()
  dis = objdump(hcq_compile(sink, "gfx1100"))
  loads = re.findall(r"\t(s_load_b(?:32|64)) s[\[\d:\]]+, (s\[\d+:\d+\])(?:, (\S+))?", dis)
  data = [l for l in loads if l[1] != "s[0:1]"]          # not the kernel-argument loads
  # w[gidx], w[3], t[gidx], t[t[gidx]], t[6], big[gidx + 1] (s_load_b64): six scalar loads of buffer data
  assert len(data) == 6, dis
  assert sum(1 for l in data if l[0] == "s_load_b64") == 1
  assert any(re.fullmatch(r"s\d+", l[2] or "") for l in data), "a register (soffset) part: w[gidx]"
  # the per-lane x[i] and the written buffer's s[gidx] stay vector loads
  assert dis.count("global_load_b32") == 2, dis
  got, ref = _run_both(mock_amd, sink, args, list(want))
  for s, w in want.items():
    np.testing.assert_array_equal(got[s], w.astype(got[s].dtype), err_msg=f"slot {s} on MOCK+AMD")
    np.testing.assert_array_equal(ref[s], w.astype(ref[s].dtype), err_msg=f"slot {s} on the CPU")


def many_scalar_args_kernel(k=120):
  """120 int32 arguments, all loaded in the prologue and live to their stores, plus a scalar loop whose trip count is
  one more argument: more than the 106 SGPRs of gfx1100."""
  from hcq.compiler import AxisType
  out, out2 = np.zeros(k * 32, np.int32), np.zeros(32, np.int32)
  O, O2 = _p(0, out, False), _p(1, out2, False)
  vs = [UOp.variable(f"v{j}", -1000, 1000, 2 + j, dtypes.int32) for j in range(k)]
  n = UOp.variable("n", 0, 100, 2 + k, dtypes.int32)
  li = UOp.special(32, "lidx0")
  r = UOp.range(n, 0, AxisType.REDUCE)
  total = ((vs[1] + r) * (li + 1)).reduce(r)
  stores = [O.index(li + 32 * j).store(vs[j] * (li + 1) + vs[(j * 7) % k]) for j in range(k)]
  sink = UOp.sink(O2.index(li).store(total), *stores, arg=KernelInfo("many_scalar_args"))
  vals = [(j * 37) % 1999 - 999 for j in range(k)]
  nv = 13
  lane = np.arange(32)
  want = np.concatenate([vals[j] * (lane + 1) + vals[(j * 7) % k] for j in range(k)]).astype(np.int32)
  want2 = (sum(vals[1] + x for x in range(nv)) * (lane + 1)).astype(np.int32)
  return sink, [out, out2, *vals, nv], {0: want, 1: want2}


def many_buffers_kernel(k=60):
  """60 buffer arguments (SGPR pairs), each read twice, reversed and in order: 120 SGPRs of pointers alone."""
  ins = [(np.arange(32, dtype=np.int32) + 1) * (j + 1) for j in range(k)]
  out = np.zeros(k * 32, np.int32)
  O = _p(0, out, False)
  P = [_p(1 + j, a) for j, a in enumerate(ins)]
  li = UOp.special(32, "lidx0")
  stores = [O.index(li + 32 * j).store(P[j].index(li).load() + P[(j * 5) % k].index(31 - li).load()) for j in range(k)]
  sink = UOp.sink(*stores, arg=KernelInfo("many_buffers"))
  want = np.concatenate([ins[j] + ins[(j * 5) % k][::-1] for j in range(k)])
  return sink, [out, *ins], {0: want}


@pytest.mark.parametrize("make", [many_scalar_args_kernel, many_buffers_kernel])
def test_sgpr_spills_to_vgpr_lanes(mock_amd, make):
  from hcq.compiler.backend.amd.regalloc import LIMITS
  from hcq.compiler.backend.amd.render import GFX1100_TARGET, compile_linear
  from hcq.compiler.lower import lower
  sink, args, want = make()
  c = compile_linear(lower(sink, GFX1100_TARGET))
  assert c.regs.sgpr_spills > 0 and c.regs.sgprs <= LIMITS["s"]
  dis = objdump(hcq_compile(sink, "gfx1100"))
  assert "v_writelane_b32" in dis and "v_readlane_b32" in dis
  got, ref = _run_both(mock_amd, sink, args, list(want), grid=(1, 1, 1))
  for s, w in want.items():
    np.testing.assert_array_equal(got[s], w, err_msg=f"slot {s} on MOCK+AMD")
    np.testing.assert_array_equal(ref[s], w, err_msg=f"slot {s} on the CPU")


def int64_args_and_constants_kernel(k=56):
  """56 int64 arguments (112 SGPRs) compared with 56 int64 constants, each built half by half in an SGPR pair
  (two s_mov_b32) and read again at the end: pairs spilled while half written."""
  out, out2 = np.zeros(32 * k, np.int64), np.zeros(32, np.int64)
  O, O2 = _p(0, out, False), _p(1, out2, False)
  args = [UOp.variable(f"a{j}", -2**62, 2**62, 2 + j, dtypes.int64) for j in range(k)]
  consts = [UOp.const(2**40 + j * 977, dtypes.int64) for j in range(k)]
  li = UOp.special(32, "lidx0")
  x = li.cast(dtypes.int64) * 2**35
  stores = [O.index(li + 32 * j).store((x + args[j] < consts[j]).cast(dtypes.int64) + args[j]) for j in range(k)]
  total = None
  for j in range(k):
    t = (x + args[j]).eq(consts[j]).cast(dtypes.int64) * (j + 1)
    total = t if total is None else total + t
  sink = UOp.sink(*stores, O2.index(li).store(total), arg=KernelInfo("int64_pairs"))
  vals = [2**40 + j * 977 - (j % 3) * 2**35 for j in range(k)]
  xs = np.arange(32, dtype=np.int64) * 2**35
  want = np.concatenate([(xs + v < 2**40 + j * 977).astype(np.int64) + v for j, v in enumerate(vals)])
  want2 = sum((xs + v == 2**40 + j * 977).astype(np.int64) * (j + 1) for j, v in enumerate(vals))
  return sink, [out, out2, *vals], {0: want, 1: want2}


def test_spilled_sgpr_pair_written_half_by_half(mock_amd):
  """A spilled pair defined one half at a time (s_mov_b32 to s[n] then s[n+1]) writes only that half's lane: the
  other lane keeps the half written before (rewriting both would store whatever the temporary's other half held)."""
  from hcq.compiler.backend.amd.render import GFX1100_TARGET, compile_linear
  from hcq.compiler.lower import lower
  sink, args, want = int64_args_and_constants_kernel()
  code = compile_linear(lower(sink, GFX1100_TARGET)).code
  halves = [i for i, m in enumerate(code) if m.name == "s_mov_b32" and i + 1 < len(code) and
            code[i + 1].name == "v_writelane_b32" and code[i + 1].mods.get("spill")]
  assert halves, "the kernel no longer spills a pair defined half by half"
  for i in halves:
    assert code[i + 2].name != "v_writelane_b32", f"both lanes written after a half definition: {code[i:i + 3]}"
  got, ref = _run_both(mock_amd, sink, args, list(want), grid=(1, 1, 1))
  for s, w in want.items():
    np.testing.assert_array_equal(got[s], w, err_msg=f"slot {s} on MOCK+AMD")
    np.testing.assert_array_equal(ref[s], w, err_msg=f"slot {s} on the CPU")
