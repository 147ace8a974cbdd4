"""The AMD encoder's per-shape plans (compiler/backend/amd/encode.py) give the bytes of its general path (the operands as
a dict of field values packed by asm.encode_fields) for every instruction the backend emits, on every AMD target; a
value that does not fit its field still fails with the general path's error naming the instruction."""
from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import amd_kernels  # noqa: E402
from hcq.compiler import CompileError  # noqa: E402
from hcq.compiler.backend.amd.encode import Encoder  # noqa: E402
from hcq.compiler.backend.amd.isel_mir import Imm, MInst, VReg  # noqa: E402
from hcq.compiler.backend.amd.render import TARGETS, compile_linear  # noqa: E402
from hcq.compiler.examples import ALL as EXAMPLES  # noqa: E402
from hcq.compiler.lower import lower  # noqa: E402

ARCHS = ("gfx1100", "gfx1200", "gfx942")
SINKS = [f().sink for f in EXAMPLES] + [f().sink for f in (amd_kernels.f16_arith, amd_kernels.lds_transpose,
                                                          amd_kernels.private_array_dynamic, amd_kernels.big_offsets,
                                                          amd_kernels.divergent_loop, amd_kernels.register_spills)]


@pytest.mark.parametrize("arch", ARCHS)
def test_plans_encode_as_the_general_path(arch):
  enc = Encoder(arch)
  shapes = set()
  for sink in SINKS:
    c = compile_linear(lower(sink, TARGETS[arch]), arch)
    for m in c.code:
      if m.name == "LABEL": continue
      simm = 3 if m.mods.get("target") is not None else None
      fast = enc.encode(m, simm)
      assert fast == enc._encode_checked(m, simm), f"{arch}: {m!r}"
      shapes.add((m.name, *m.defs, 0, *m.uses, 0, *m.mods))
  planned = [k for k in shapes if enc._plans.get(k) is not None]
  assert len(planned) > 0.9 * len(shapes)   # the plans do the work, the general path is the exception


def _sreg(n: int) -> VReg:
  r = VReg("s")
  r.phys = n
  return r


def test_a_value_out_of_its_field_fails_as_before():
  enc = Encoder("gfx1100")
  ok = MInst("s_add_i32", {"sdst": _sreg(3)}, {"ssrc0": _sreg(4), "ssrc1": Imm(1234)})
  assert enc.encode(ok) == enc._encode_checked(ok)    # the plan of this shape exists now
  bad = MInst("s_add_i32", {"sdst": _sreg(300)}, {"ssrc0": _sreg(4), "ssrc1": Imm(1234)})
  with pytest.raises(CompileError, match=r"s_add_i32.*sdst|sdst.*s_add_i32"):
    enc.encode(bad)
  v = VReg("v")
  v.phys = 1
  far = MInst("ds_load_b32", {"vdst": v}, {"addr": v}, offset=0x10000)
  with pytest.raises(CompileError, match="LDS offset 65536 out of range"):
    enc.encode(far)
  two = MInst("s_add_i32", {"sdst": _sreg(3)}, {"ssrc0": Imm(1000), "ssrc1": Imm(1234)})
  with pytest.raises(CompileError, match="two different literals"):
    enc.encode(two)
