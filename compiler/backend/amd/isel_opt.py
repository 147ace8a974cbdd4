"""Clean-up passes over the selected machine code (before register allocation):

  coalesce_copies  the copies that private-register (REG) loads and stores made (`t = v_mov acc`, `acc = v_mov s`)
                   disappear where that is safe in straight-line code, so that an accumulator update is one
                   instruction (`acc = v_fma_f32 a, b, acc`)
  dce              instructions without side effects whose results are never read are removed (to a fixed point,
                   so loop-carried values are kept while anything reads them)
  vectorize_lds    four (two) LDS dword loads from one aligned address at consecutive offsets become one
                   ds_load_b128 (ds_load_b64)
  hoist_loads      memory loads move up (within straight-line code, past ALU work that does not define their
                   operands, never past a store, barrier, label, branch, EXEC change or another load, at most
                   HOIST_MAX instructions) so that several loads are in flight before their results are needed
"""
from __future__ import annotations

from .isel_mir import MInst, Spec, Sub, VReg

_SIDE_EFFECT_PREFIXES = ("global_store", "ds_store", "scratch_store", "s_cbranch", "s_branch", "s_barrier", "s_endpgm", "s_waitcnt",
                         "s_cmp", "s_and_saveexec", "LABEL", "s_nop", "s_sendmsg")


_EFFECT_NAMES: dict[str, bool] = {}   # mnemonic -> whether it starts with one of _SIDE_EFFECT_PREFIXES


def has_side_effect(m: MInst) -> bool:
  by_name = _EFFECT_NAMES.get(m.name)
  if by_name is None: by_name = _EFFECT_NAMES[m.name] = m.name.startswith(_SIDE_EFFECT_PREFIXES)
  if by_name: return True
  return any(type(d) is Spec for d in m.defs.values())


def is_boundary(m: MInst) -> bool:
  """Where straight-line reasoning stops: labels, branches, EXEC changes."""
  return m.name == "LABEL" or m.name.startswith(("s_branch", "s_cbranch")) or \
      any(isinstance(d, Spec) for d in m.defs.values()) or m.name.startswith("s_and_saveexec")


def dce(code: list[MInst]) -> list[MInst]:
  """Removes, until none is left, every instruction without side effects whose defined registers (none of them
  fixed) no remaining instruction reads. A worklist over use counts: an instruction removed releases its reads, and
  a register whose last reader went makes its definitions candidates (one pass over the code, not one per round;
  instructions that only read each other, as a loop-carried value does, keep each other)."""
  uses: dict = {}
  defs_of: dict = {}
  defined: list = [None] * len(code)   # a removable instruction's defined registers (None: it stays)
  get = uses.get
  effects = _EFFECT_NAMES
  for i, m in enumerate(code):
    for v in m.uses.values():   # isel_mir._regs, inlined: the registers read (a Sub's register)
      t = v.__class__
      if t is VReg: uses[v] = get(v, 0) + 1
      elif t is Sub: uses[v.reg] = get(v.reg, 0) + 1
    eff = effects.get(m.name)
    if eff is None: eff = effects[m.name] = m.name.startswith(_SIDE_EFFECT_PREFIXES)
    if eff: continue
    ds = []   # has_side_effect's Spec test and regs_defined (with the fixed test), in one walk of the definitions
    for d in m.defs.values():
      t = d.__class__
      if t is VReg: r = d
      elif t is Sub: r = d.reg
      elif t is Spec: break
      else: continue
      if r.fixed is not None: break
      ds.append(r)
    else: defined[i] = ds
  dead = [False] * len(code)
  work = []
  for i, ds in enumerate(defined):
    if ds is None: continue
    for d in ds:
      if get(d, 0): break
    else: work.append(i)
  if not work: return list(code)   # (nothing unread: nothing else becomes so)
  for i, ds in enumerate(defined):   # each register's removable definitions, for the worklist
    if ds is None: continue
    for r in ds:
      if r in defs_of: defs_of[r].append(i)
      else: defs_of[r] = [i]
  while work:
    i = work.pop()
    if dead[i]: continue
    dead[i] = True
    for r in code[i].regs_used():
      n = uses[r] = uses[r] - 1
      if n == 0:
        for j in defs_of.get(r, ()):
          if not dead[j] and not any(get(d, 0) for d in defined[j]): work.append(j)
  return [m for m, d in zip(code, dead) if not d]


def coalesce_copies(code: list[MInst]) -> list[MInst]:
  code: list = list(code)
  uses_of: dict[VReg, list[int]] = {}
  defs_of: dict[VReg, list[int]] = {}
  for i, m in enumerate(code):
    for v in m.uses.values():
      if v.__class__ is VReg:
        if v in uses_of: uses_of[v].append(i)
        else: uses_of[v] = [i]
    for v in m.defs.values():
      if v.__class__ is VReg:
        if v in defs_of: defs_of[v].append(i)
        else: defs_of[v] = [i]
  # (b) t = mov r  ->  uses of t read r, when every use of t comes before r changes (straight line)
  for i, m in enumerate(code):
    src = m.uses.get("src0")
    if not (m.mods.get("copy") and isinstance(src, VReg) and src.cls == "v"): continue
    t, r = m.defs["vdst"], src
    if t is r or len(defs_of.get(t, ())) != 1: continue
    uses_t = sorted(set(uses_of.get(t, ())))
    if not uses_t or uses_t[0] < i: continue
    last_use, ok = uses_t[-1], True
    for j in range(i + 1, last_use + 1):
      x = code[j]
      if x is None: continue
      if is_boundary(x) or (j < last_use and r in x.regs_defined()): ok = False; break
    if not ok: continue
    for j in uses_t:
      code[j].uses = {k: (r if v is t else v) for k, v in code[j].uses.items()}
    uses_of.setdefault(r, []).extend(uses_t)
    uses_of[t] = []
    uses_of[r].remove(i)
    code[i] = None
  # (a) r = mov s  (s defined once by P, read only here)  ->  P defines r
  for i, m in enumerate(code):
    if m is None: continue
    s = m.uses.get("src0")
    if not (m.mods.get("copy") and isinstance(s, VReg) and s.cls == "v" and len(defs_of.get(s, ())) == 1): continue
    r = m.defs["vdst"]
    p = defs_of[s][0]
    if set(uses_of.get(s, ())) != {i} or p >= i or code[p] is None: continue
    if "vdst" not in code[p].defs or code[p].name.startswith(("global_", "ds_", "scratch_")): continue
    ok = True
    for j in range(p + 1, i):
      x = code[j]
      if x is None: continue
      if is_boundary(x) or r in x.regs_defined() or r in x.regs_used(): ok = False; break
    if not ok: continue
    code[p].defs = {k: (r if v is s else v) for k, v in code[p].defs.items()}
    defs_of.setdefault(r, []).append(p)
    code[i] = None
  return [m for m in code if m is not None]


HOIST_MAX = 48


def _is_load(m: MInst) -> bool: return m.name.startswith(("global_load", "ds_load", "scratch_load"))


def _blocks_hoist(x: MInst) -> bool:
  return is_boundary(x) or _is_load(x) or x.name.startswith(("global_store", "ds_store", "scratch_store", "s_barrier", "s_load"))


_LOAD_NAMES: dict[str, bool] = {}   # mnemonic -> _is_load


def hoist_loads(code: list[MInst]) -> list[MInst]:
  out: list[MInst] = []
  loads = _LOAD_NAMES
  for m in code:
    out.append(m)
    load = loads.get(m.name)
    if load is None: load = loads[m.name] = _is_load(m)
    if not load: continue
    needs = set(m.regs_used())
    k = len(out) - 1
    while k > 0 and len(out) - 1 - k < HOIST_MAX:
      prev = out[k - 1]
      if _blocks_hoist(prev) or needs & set(prev.regs_defined()) or m.defs["vdst"] in prev.regs_used(): break
      out[k - 1], out[k] = out[k], out[k - 1]
      k -= 1
  return out


def vectorize_lds(code: list[MInst], align: dict) -> list[MInst]:
  """ds_load_b32 x4 (x2) from one address register at offsets o, o+4, ... -> one ds_load_b128 (b64), when the
  address register's value is known to be a multiple of 16 (8) bytes (align: VReg -> byte alignment) and o too,
  and no LDS store, barrier or control flow lies between the first and the last of them. The single loads' results
  become Sub(vector, k)."""
  code = list(code)
  for width, name in ((4, "ds_load_b128"), (2, "ds_load_b64")):
    nbytes = 4 * width
    rename: dict = {}
    for i, m in enumerate(code):
      if m is None or m.name != "ds_load_b32": continue
      a, o = m.uses["addr"], m.mods.get("offset", 0)
      if o % nbytes or align.get(a, 1) % nbytes: continue
      want = {o + 4 * k: k for k in range(1, width)}
      found = {}
      for j in range(i + 1, len(code)):
        x = code[j]
        if x is None: continue
        if is_boundary(x) or x.name.startswith(("ds_store", "s_barrier")): break
        if x.name == "ds_load_b32" and x.uses["addr"] is a and x.mods.get("offset", 0) in want:
          found.setdefault(want[x.mods["offset"]], j)
          if len(found) == width - 1: break
      if len(found) != width - 1: continue
      vec = VReg("v", width)
      rename[m.defs["vdst"]] = Sub(vec, 0)
      for k, j in found.items():
        rename[code[j].defs["vdst"]] = Sub(vec, k)
        code[j] = None
      code[i] = MInst(name, {"vdst": vec}, {"addr": a}, offset=o)
    code = [m for m in code if m is not None]
    if rename:
      for m in code: m.uses = {f: rename.get(v, v) if isinstance(v, VReg) else v for f, v in m.uses.items()}
  return code


def optimize(code: list[MInst], align: dict | None = None, copies: bool = True) -> list[MInst]:
  """copies=False: the selection made no REG-buffer copies (it had no REG buffer in registers), none to look for."""
  code = dce(code)
  # coalescing only ever acts on the copies REG loads and stores made; without one it changes nothing, and dce is a
  # fixed point already (a second run would remove nothing)
  if copies and any(m.mods.get("copy") for m in code): code = dce(coalesce_copies(code))
  if align: code = vectorize_lds(code, align)
  return hoist_loads(code)
