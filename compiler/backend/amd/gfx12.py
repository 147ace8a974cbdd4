"""gfx1200 (RDNA4) from the RDNA3 backend's machine IR: what differs after register allocation.

    code = insert_waits(code)      # s_wait_loadcnt / s_wait_dscnt / s_wait_kmcnt, the split barrier
    code = rename(code)            # RDNA4 mnemonics for the RDNA3 ones instruction selection uses

Counters (RDNA4 ISA "Data Dependency Resolution"; LLVM AMDGPUUsage "Memory Model GFX12", which names them
LOADcnt, STOREcnt, DScnt, KMcnt and so on, each waited for by its own SOPP s_wait_<counter> with the count in simm16):
gfx11's VM_CNT becomes LOADcnt for vector memory loads (global and scratch, returned in order) and STOREcnt for their
stores; gfx11's LGKM_CNT is split into DScnt (LDS, in order) and KMcnt (scalar memory, out of order: waited to 0).
The same placement as gfx11 (waits.insert_counter_waits): before a reader of a pending load, down to the number issued
after it (rounded down to WAIT_GRANULE); LDS stores and loads waited for before the barrier; everything at labels
and branches. Stores are not waited for (nothing reads global memory back in a kernel, and a scratch reload of a
spill slot is ordered after its store: same address, same wave).

Barrier: RDNA4 has no S_BARRIER; a work-group barrier is S_BARRIER_SIGNAL with the work-group barrier id -1 and then
S_BARRIER_WAIT -1 (0xffff) (RDNA4 ISA "Split barriers"; clang-19 -mcpu=gfx1200 lowers __builtin_amdgcn_s_barrier so:
`s_barrier_signal -1` [0xc1,0x4e,0x80,0xbe], `s_barrier_wait 0xffff` [0xff,0xff,0x94,0xbf]).

Renames (llvm-mc-19 -mcpu=gfx1200 spellings of the same operations): SALU adds/subs take a _co_ in their name
(s_add_co_i32), 64-bit multiply-adds are v_mad_co_*, IEEE maxNum/minNum are v_max_num_* / v_min_num_*, VOP3-only
f64 operations and 64-bit shifts gained a VOP2 form so their VOP3 spelling ends in _e64, and s_waitcnt_depctr is
s_wait_alu (same simm16 fields). Memory instructions keep their names; their encodings (VGLOBAL/VSCRATCH with a
24-bit IOFFSET, TH and SCOPE cache bits; SMEM's 24-bit offset) are the encoder's (render.Encoder).
"""
from __future__ import annotations

import re

from .isel_mir import Imm, MInst
from .waits import BARRIER, JOIN, KINDS, LDS_LOAD, LDS_STORE, SMEM_LOAD, VM_LOAD, WAIT_GRANULE, kind_of  # (waits.py)

BARRIER_ALL = 0xffff    # s_barrier_wait -1: the work-group barrier

_RENAMES = {"s_add_i32": "s_add_co_i32", "s_sub_i32": "s_sub_co_i32", "s_add_u32": "s_add_co_u32",
            "s_sub_u32": "s_sub_co_u32", "s_addc_u32": "s_add_co_ci_u32", "s_subb_u32": "s_sub_co_ci_u32",
            "v_mad_u64_u32": "v_mad_co_u64_u32", "v_mad_i64_i32": "v_mad_co_i64_i32",
            "s_waitcnt_depctr": "s_wait_alu"}
_NUM = re.compile(r"^v_(max|min|med)(3?)_f(16|32|64)")
_E64 = ("v_add_f64", "v_mul_f64", "v_lshlrev_b64")     # gfx1200 has VOP2 forms of these (v_lshrrev_b64 and
                                                        # v_ashrrev_i64 stay VOP3-only, without a suffix)


def gfx12_name(name: str) -> str:
  """The gfx1200 mnemonic of an RDNA3 one (the name itself where both spell it the same)."""
  if name in _RENAMES: return _RENAMES[name]
  m = _NUM.match(name)
  if m and name[m.end():] in ("", "_e32", "_e64") and (m[1] != "med" or m[2]):
    name = f"v_{m[1]}{m[2]}_num_f{m[3]}{name[m.end():]}"
  if name in _E64: name += "_e64"
  if name.startswith(("v_max_num_f64", "v_min_num_f64")) and not name.endswith(("_e32", "_e64")): name += "_e64"
  return name


def rename(code: list[MInst]) -> list[MInst]:
  names: dict = {}   # a kernel repeats its few mnemonics
  for m in code:
    if m.name != "LABEL":
      new = names.get(m.name)
      if new is None: new = names[m.name] = gfx12_name(m.name)
      m.name = new
  return code


def _wait(counter: str, n: int) -> MInst: return MInst(f"s_wait_{counter}", simm16=n)


def insert_waits(code: list[MInst]) -> list[MInst]:
  out: list[MInst] = []
  pend = {"loadcnt": [], "dscnt": [], "kmcnt": []}   # counter -> destinations (None for a store) in issue order

  def wait(counter, n):
    if n is None: return
    out.append(_wait(counter, n))
    q = pend[counter]
    pend[counter] = q[len(q) - n:] if n else []

  for m in code:
    kind = KINDS.get(m.name)
    if kind is None: kind = kind_of(m.name)
    if kind[0] == JOIN:
      for c in pend:
        if pend[c]: wait(c, 0)
    elif kind[0] == BARRIER:
      if pend["dscnt"]: wait("dscnt", 0)
      out.append(MInst("s_barrier_signal", uses={"ssrc0": Imm(-1)}))
      out.append(MInst("s_barrier_wait", simm16=BARRIER_ALL))
      continue
    elif any(pend.values()):   # (nothing pending: nothing to wait for)
      regs = set(m.regs_used()) | set(m.regs_defined())
      for c, q in pend.items():
        n = None
        for k, r in enumerate(q):
          if r is not None and r in regs: n = len(q) - k - 1
        if n is not None:
          wait(c, 0 if c == "kmcnt" else n - n % WAIT_GRANULE)
    out.append(m)
    counted = kind[1]
    if not counted: continue
    if counted == VM_LOAD: pend["loadcnt"].append(m.defs["vdst"])
    elif counted == LDS_LOAD: pend["dscnt"].append(m.defs["vdst"])
    elif counted == LDS_STORE: pend["dscnt"].append(None)
    elif counted == SMEM_LOAD: pend["kmcnt"].append(m.defs["sdata"])
  return out
