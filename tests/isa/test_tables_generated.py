"""The committed gfx1100 tables are what the generator produces from llvm-mc-19 (nothing typed by hand)."""
import os

import pytest

from hcq.autogen.isa import gen_rdna3


@pytest.mark.slow
@pytest.mark.tools("llvm-mc-19")
def test_tables_regenerate_identically(tmp_path):
  tables = gen_rdna3.generate("gfx1100")
  out = tmp_path / "gfx1100.py"
  gen_rdna3.write_module("gfx1100", tables, str(out), gen_rdna3.symbolic_tables("gfx1100", tables))
  committed = os.path.join(os.path.dirname(gen_rdna3.__file__), "gfx1100.py")
  assert out.read_text() == open(committed).read()


def test_table_sizes():
  from hcq.autogen.isa import gfx1100
  counts = {enc: len(ops) for enc, ops in gfx1100.OPS.items() if enc != "VOPD"}
  # every microcode format has opcodes; sizes as walked from llvm-mc-19 (gfx1100)
  assert all(counts[e] > 0 for e in gfx1100.LAYOUTS if e not in ("EXP", "VOPD")), counts
  assert counts["VOP3"] + counts["VOP3SD"] > 400 and counts["VOPC"] > 150 and counts["DS"] > 100
  assert len(gfx1100.OPS["VOPD"]["X"]) >= 13 and len(gfx1100.OPS["VOPD"]["Y"]) >= 16
  assert os.path.getsize(gfx1100.__file__) < 5 << 20
