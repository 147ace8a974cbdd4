"""Clean-up passes over the selected machine code (before register allocation):

  coalesce_copies  the copies that private-register (REG) loads and stores made (`t = v_mov acc`, `acc = v_mov s`)
                   disappear where that is safe in straight-line code, so that an accumulator update is one
                   instruction (`acc = v_fma_f32 a, b, acc`)
  dce              instructions without side effects whose results are never read are removed (to a fixed point,
                   so loop-carried values are kept while anything reads them)
"""
from __future__ import annotations

from .isel_mir import MInst, Spec, VReg

_SIDE_EFFECT_PREFIXES = ("global_store", "ds_store", "s_cbranch", "s_branch", "s_barrier", "s_endpgm", "s_waitcnt",
                         "s_cmp", "s_and_saveexec", "LABEL", "s_nop", "s_sendmsg")


def has_side_effect(m: MInst) -> bool:
  if m.name.startswith(_SIDE_EFFECT_PREFIXES): return True
  return any(isinstance(d, Spec) for d in m.defs.values())


def is_boundary(m: MInst) -> bool:
  """Where straight-line reasoning stops: labels, branches, EXEC changes."""
  return m.name == "LABEL" or m.name.startswith(("s_branch", "s_cbranch")) or \
      any(isinstance(d, Spec) for d in m.defs.values()) or m.name.startswith("s_and_saveexec")


def dce(code: list[MInst]) -> list[MInst]:
  while True:
    used = set()
    for m in code:
      for v in m.uses.values():
        if isinstance(v, VReg): used.add(v)
    keep = [m for m in code if has_side_effect(m) or any(d in used or d.fixed is not None
                                                         for d in m.defs.values() if isinstance(d, VReg))]
    if len(keep) == len(code): return keep
    code = keep


def _defs_count(code):
  n = {}
  for m in code:
    for d in m.regs_defined(): n[d] = n.get(d, 0) + 1
  return n


def coalesce_copies(code: list[MInst]) -> list[MInst]:
  code = list(code)
  # (b) t = mov r  ->  uses of t read r, when every use of t comes before r changes (straight line)
  i = 0
  while i < len(code):
    m = code[i]
    src = m.uses.get("src0")
    if m.mods.get("copy") and isinstance(src, VReg) and src.cls == "v" and m.defs["vdst"] is not src:
      t, r = m.defs["vdst"], src
      ok, last_use = True, None
      uses_t = [j for j in range(len(code)) if any(v is t for v in code[j].uses.values())]
      if sum(1 for x in code if t in x.regs_defined()) != 1 or not uses_t or uses_t[0] < i: ok = False
      if ok:
        last_use = uses_t[-1]
        for j in range(i + 1, last_use + 1):
          x = code[j]
          if is_boundary(x): ok = False; break
          if r in x.regs_defined() and j < last_use: ok = False; break
      if ok:
        for j in uses_t:
          code[j].uses = {k: (r if v is t else v) for k, v in code[j].uses.items()}
        del code[i]
        continue
    i += 1
  # (a) r = mov s  (s defined once by P, read only here)  ->  P defines r
  ndefs = _defs_count(code)
  i = 0
  while i < len(code):
    m = code[i]
    s = m.uses.get("src0")
    if m.mods.get("copy") and isinstance(s, VReg) and s.cls == "v" and ndefs.get(s) == 1:
      r = m.defs["vdst"]
      uses_s = [j for j in range(len(code)) if any(v is s for v in code[j].uses.values())]
      p = next((j for j in range(i - 1, -1, -1) if s in code[j].regs_defined()), None)
      ok = uses_s == [i] and p is not None and "vdst" in code[p].defs and not code[p].name.startswith(("global_", "ds_"))
      if ok:
        for j in range(p + 1, i):
          x = code[j]
          if is_boundary(x) or r in x.regs_defined() or r in x.regs_used(): ok = False; break
      if ok:
        code[p].defs = {k: (r if v is s else v) for k, v in code[p].defs.items()}
        del code[i]
        ndefs[r] = ndefs.get(r, 0)
        continue
    i += 1
  return code


def optimize(code: list[MInst]) -> list[MInst]:
  return dce(coalesce_copies(dce(code)))
