"""Every RDNA3 mnemonic instruction selection can emit has a gfx1200 and a gfx942 spelling in those targets' ISA
tables (gfx12.gfx12_name, gfx9.gfx9_name), and the renames are LLVM's (llvm-mc-19 spellings)."""
from __future__ import annotations

import glob
import os
import re

import pytest

from hcq.compiler.backend.amd.gfx9 import gfx9_name
from hcq.compiler.backend.amd.gfx12 import gfx12_name
from hcq.compiler.isa.amd.tables import arch_tables

AMD = os.path.join(os.path.dirname(__file__), "..", "..", "compiler", "backend", "amd")


def _emitted() -> set:
  src = "".join(open(f).read() for f in glob.glob(os.path.join(AMD, "isel*.py")) + [os.path.join(AMD, "regalloc.py")])
  names = set(re.findall(r'"((?:v|s|ds|global|scratch)_[a-z0-9_]+)"', src))
  names |= {f"v_cmp_{c}_{t}_e64" for c in ("lt", "le", "eq", "ne", "neq", "gt", "ge")
            for t in ("f16", "f32", "f64", "i32", "u32", "i64", "u64")}
  names |= {f"{p}_{s}" for p in ("global_load", "scratch_load", "ds_load") for s in ("u8", "i8", "u16", "i16", "b32",
                                                                                    "b64", "b128")}
  names |= {f"{p}_{s}" for p in ("global_store", "scratch_store", "ds_store") for s in ("b8", "b16", "b32", "b64")}
  names |= {"s_load_b32", "s_load_b64", "s_load_b128"}
  rdna3 = arch_tables("gfx1100").by_name
  # s_barrier becomes the split barrier (gfx12.insert_waits); lane-mask SALU ops become _b64 (gfx9.widen_masks)
  return {n for n in names if n in rdna3} - {"s_barrier"}


def test_every_selected_mnemonic_exists_on_gfx1200():
  t = arch_tables("gfx1200").by_name
  names = _emitted()
  assert len(names) > 60
  assert not [n for n in names if gfx12_name(n) not in t]


def test_every_selected_mnemonic_exists_on_gfx942():
  t = arch_tables("gfx942")
  missing = [n for n in _emitted() if gfx9_name(n.replace("_b32", "_b64") if "saveexec" in n else n, t) not in t.by_name]
  assert not missing


@pytest.mark.parametrize("rdna3,gfx1200,gfx942", [
  ("s_add_i32", "s_add_co_i32", "s_add_i32"), ("v_mad_u64_u32", "v_mad_co_u64_u32", "v_mad_u64_u32"),
  ("v_max_f32_e64", "v_max_num_f32_e64", "v_max_f32_e64"), ("v_add_f64", "v_add_f64_e64", "v_add_f64"),
  ("v_ashrrev_i64", "v_ashrrev_i64", "v_ashrrev_i64"), ("v_add_nc_u32_e64", "v_add_nc_u32_e64", "v_add_u32_e64"),
  ("v_add_co_ci_u32_e64", "v_add_co_ci_u32_e64", "v_addc_co_u32_e64"), ("v_add_co_u32", "v_add_co_u32", "v_add_co_u32_e64"),
  ("global_load_u16", "global_load_u16", "global_load_ushort"), ("ds_store_b32", "ds_store_b32", "ds_write_b32"),
  ("s_load_b64", "s_load_b64", "s_load_dwordx2"), ("s_and_not1_b64", "s_and_not1_b64", "s_andn2_b64"),
  ("v_clz_i32_u32_e64", "v_clz_i32_u32_e64", "v_ffbh_u32_e64"), ("s_waitcnt_depctr", "s_wait_alu", None)])
def test_renames(rdna3, gfx1200, gfx942):
  assert gfx12_name(rdna3) == gfx1200
  if gfx942: assert gfx9_name(rdna3, arch_tables("gfx942")) == gfx942
