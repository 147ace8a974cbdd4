"""Uniform values (a register every thread of the batch holds the same value, kept as one 0-d value: parameters,
%ntid, loads from one global address) give the same results as the same values held per thread, for every kind of
instruction (integer, float, conversions, packed halves, warp-wide ones)."""
from __future__ import annotations

import numpy as np
import pytest

from hcq.mockgpu.nv.ptx import parse, run
from ptx_launch import HostMemory, pack_params
from test_ptx_interp import kernel_ptx

OPS = ["brev.b32 %r2, %r1;", "brev.b64 %rd3, %rd2;", "popc.b32 %r2, %r1;", "clz.b64 %r2, %rd2;", "bfind.u32 %r2, %r1;",
       "prmt.b32 %r2, %r1, %r1, 0x3210;", "bfe.u32 %r2, %r1, 4, 8;", "bfi.b32 %r2, %r1, %r1, 4, 8;",
       "fns.b32 %r2, %r1, 2, 2;", "dp4a.u32.u32 %r2, %r1, %r1, %r1;", "sad.u32 %r2, %r1, 5, %r1;",
       "mul.hi.u64 %rd3, %rd2, %rd2;", "cvt.rn.f16x2.f32 %r2, %f1, %f1;", "ex2.approx.f32 %f2, %f1;",
       "sin.approx.f32 %f2, %f1;", "div.rn.f32 %f2, %f1, %f1;", "cvt.rzi.s32.f32 %r2, %f1;", "mov.b64 {%r2, %r3}, %rd2;",
       "lop3.b32 %r2, %r1, %r1, %r1, 0x96;", "shf.l.wrap.b32 %r2, %r1, %r1, %r1;", "min.xorsign.abs.f32 %f2, %f1, %f1;",
       "add.rz.f32 %f2, %f1, %f1;", "fma.rn.bf16 %h2, %h1, %h1, %h1;", "szext.wrap.s32 %r2, %r1, 5;",
       "bmsk.wrap.b32 %r2, %r1, 3;", "mul24.hi.u32 %r2, %r1, %r1;", "vote.sync.ballot.b32 %r2, %p1, 0xffffffff;",
       "redux.sync.add.u32 %r2, %r1, 0xffffffff;", "match.any.sync.b32 %r2, %r1, 0xffffffff;",
       "shfl.sync.idx.b32 %r2, %r1, 3, 31, 0xffffffff;", "add.s16x2 %r2, %r1, %r1;", "rcp.rm.f64 %fd2, %fd1;",
       "cvt.rna.tf32.f32 %r2, %f1;", "atom.global.add.u32 %r2, [%rd1+512], %r1;", "selp.b32 %r2, %r1, 7, %p1;"]
STORE = """
  mov.u32 %r4, %tid.x;
  mul.wide.u32 %rd4, %r4, 32;
  add.s64 %rd4, %rd1, %rd4;
  st.global.v2.u32 [%rd4], {%r2, %r3};
  st.global.u64 [%rd4+8], %rd3;
  st.global.f32 [%rd4+16], %f2;
  st.global.f64 [%rd4+24], %fd2;
  st.global.u16 [%rd4+20], %h2;
"""
DECLS = ".reg .b32 %r<6>;\n.reg .f32 %f<3>;\n.reg .b64 %rd<6>;\n.reg .f64 %fd<3>;\n.reg .pred %p<2>;\n.reg .b16 %h<3>;"
LOADS = {   # the operands from the parameters (one value for every thread) or from per-thread slots of one array
  "uniform": """
  ld.param.u64 %rd1, [p_out];
  ld.param.u32 %r1, [p_v];
  ld.param.f32 %f1, [p_v];
  ld.param.u64 %rd2, [p_w];
  ld.param.f64 %fd1, [p_w];
  ld.param.b16 %h1, [p_v];
""",
  "per_thread": """
  ld.param.u64 %rd1, [p_out];
  ld.param.u64 %rd5, [p_in];
  mov.u32 %r5, %tid.x;
  mul.wide.u32 %rd4, %r5, 16;
  add.s64 %rd5, %rd5, %rd4;
  ld.global.u32 %r1, [%rd5];
  ld.global.f32 %f1, [%rd5];
  ld.global.u64 %rd2, [%rd5+8];
  ld.global.f64 %fd1, [%rd5+8];
  ld.global.b16 %h1, [%rd5];
"""}


def _run(op: str, how: str, v: int, w: int) -> np.ndarray:
  body = LOADS[how] + "  setp.ne.u32 %p1, %r1, 0;\n  mov.u32 %r3, 0;\n  mov.u64 %rd3, 0;\n  mov.f32 %f2, 0f00000000;\n" \
         "  mov.f64 %fd2, 0d0000000000000000;\n  mov.b16 %h2, 0;\n  " + op + STORE
  k = parse(kernel_ptx(body, params=".param .u64 p_out, .param .u64 p_in, .param .u32 p_v, .param .u64 p_w",
                       decls=DECLS)).kernels["k"]
  hm = HostMemory()
  oa, out = hm.array(np.zeros(64 * 8 + 160, np.uint32))
  per = np.zeros((64, 4), np.uint32)
  per[:, 0] = v
  per[:, 2:4] = np.array([w], np.uint64).view(np.uint32)
  ia, _ = hm.array(per)
  run(k, (1,), (64,), pack_params(k, [oa, ia, np.uint32(v), np.uint64(w)]), hm.mem)
  return out.copy()


@pytest.mark.parametrize("op", OPS)
def test_a_uniform_operand_gives_what_per_thread_operands_give(op):
  v, w = 0x40490FDB, 0x400921FB54442D18     # pi as f32 bits (and its bytes as integers), pi as f64 bits
  uni, per = _run(op, "uniform", v, w), _run(op, "per_thread", v, w)
  assert np.array_equal(uni, per), op
  assert uni[:64 * 8].any() or op.startswith("atom"), f"{op} wrote nothing: the comparison would prove nothing"
