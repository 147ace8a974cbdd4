"""How many instructions one wave of a kernel executes, read from its code with hcq's disassembler: the benches
measure the emulator from outside (through hcq.open), so they count the work of a dispatch from the kernel itself.

    from wavecount import kernel_waves, wave_instructions
    per_wave = wave_instructions(blob, "vadd")          # instructions one wave executes, s_endpgm included
    waves = kernel_waves(blob, "vadd", groups=2048, group_size=64)

The walk starts at the kernel's entry and follows its control flow. Straight-line code is counted as it stands; a
branch is followed when scalar registers holding constants decide it: a loop counter set by s_mov/s_movk, stepped by
s_add/s_sub/s_addk and compared by s_cmp/s_cmpk, as compilers emit for a loop with a known trip count. Every wave of
such a kernel runs the same instructions. A branch on anything else (EXEC, VCC, a value loaded from memory or derived
from the work-group id) is an error: the count would depend on the data or the wave, so this method does not apply.
"""
from __future__ import annotations

from hcq.compiler.isa.amd.codeobject import CodeObject
from hcq.compiler.isa.amd.decode import decode_all

MASK = 0xFFFFFFFF
# SALU instructions that write no SCC: the condition a later s_cbranch_scc* reads survives them
_KEEP_SCC = ("s_mov_b32", "s_movk_i32", "s_waitcnt", "s_delay_alu", "s_nop", "s_clause", "s_barrier", "s_sendmsg",
             "s_load_", "s_buffer_load_", "s_dcache_inv", "s_sleep", "s_setprio", "s_inst_prefetch", "s_icache_inv",
             "s_wait_", "s_code_end", "s_ttracedata")
_SALU = ("SOP1", "SOP2", "SOPK", "SOPC")
_CMP = {"eq": lambda a, b: a == b, "lg": lambda a, b: a != b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b,
        "lt": lambda a, b: a < b, "le": lambda a, b: a <= b}


class NotCountable(ValueError):
  """The kernel's instruction count depends on its data or on the wave: it cannot be read from the code alone."""


def _kernel(blob: bytes, name: str | None):
  co = CodeObject.parse(blob)
  if name is None: name = next(iter(co.kernels))
  if name not in co.kernels: raise NotCountable(f"no kernel {name!r} in the code object (has {', '.join(co.kernels)})")
  return co, co.kernels[name]


def _signed(v: int) -> int:
  v &= MASK
  return v - (1 << 32) if v & 0x80000000 else v


def _value(op, sgprs: dict[int, int]):
  """The 32-bit value of a source operand, or None when unknown."""
  if op.kind == "sgpr" and op.count == 1: return sgprs.get(op.index)
  if op.kind in ("int", "literal", "imm") and isinstance(op.value, int): return op.value & MASK
  return None


def _step(inst, sgprs: dict[int, int], scc):
  """Apply one instruction to the known scalar state; return the new SCC (None: unknown)."""
  name, ops = inst.name, inst.operands
  srcs = [_value(o, sgprs) for o in ops[1:]]
  dst = ops[0] if ops and ops[0].field in ("sdst", "sdata") and ops[0].kind == "sgpr" else None
  if name in ("s_mov_b32", "s_movk_i32") and dst is not None:
    v = srcs[0]
    if name == "s_movk_i32" and v is not None: v = (v & 0xFFFF) - (0x10000 if v & 0x8000 else 0)
    _set(sgprs, dst, v)
    return scc
  if name in ("s_add_u32", "s_add_i32", "s_sub_u32", "s_sub_i32", "s_addk_i32") and dst is not None:
    a, b = (_value(dst, sgprs), srcs[0]) if name == "s_addk_i32" else (srcs[0], srcs[1])
    if name == "s_addk_i32" and b is not None: b = (b & 0xFFFF) - (0x10000 if b & 0x8000 else 0)
    if a is None or b is None:
      _set(sgprs, dst, None)
      return None
    sub = "sub" in name
    r = (a - b if sub else a + b) & MASK
    _set(sgprs, dst, r)
    if name.endswith("u32"): return int(a < b) if sub else int(a + b > MASK)
    sa, sb, sr = _signed(a), _signed(b), _signed(r)
    return int(sr != (sa - sb if sub else sa + sb))
  if name.startswith(("s_cmp_", "s_cmpk_")) and name[-3:] in ("i32", "u32"):
    op = name.split("_")[2]
    values = [_value(o, sgprs) for o in ops]
    if op not in _CMP or len(values) != 2 or None in values: return None
    a, b = values
    if name.startswith("s_cmpk_"):   # simm16: zero-extended for u32, sign-extended for i32
      b &= 0xFFFF
      if name.endswith("i32") and b & 0x8000: b = (b - 0x10000) & MASK
    if name.endswith("i32"): a, b = _signed(a), _signed(b)
    return int(_CMP[op](a, b))
  # anything else: what it writes to scalar registers becomes unknown, and SALU instructions may set SCC
  for o in ops:
    if o.kind == "sgpr" and (o.field or "").endswith(("dst", "sdata", "dstx", "dsty")): _set(sgprs, o, None)
  if inst.encoding in _SALU and not name.startswith(_KEEP_SCC): return None
  return scc


def _set(sgprs: dict[int, int], op, value) -> None:
  for i in range(op.index, op.index + op.count): sgprs.pop(i, None)
  if value is not None and op.count == 1: sgprs[op.index] = value & MASK


def wave_instructions(blob: bytes, name: str | None = None, limit: int = 50_000_000) -> int:
  """Instructions one wave of kernel `name` (default: the first) executes, s_endpgm included."""
  co, k = _kernel(blob, name)
  insts = decode_all(k.code, co.mach)
  at = {inst.offset: i for i, inst in enumerate(insts)}
  sgprs: dict[int, int] = {}
  scc, i, count = None, 0, 0
  while True:
    if i >= len(insts): raise NotCountable(f"kernel {k.name}: runs off the end of its code without s_endpgm")
    inst = insts[i]
    count += 1
    if count > limit: raise NotCountable(f"kernel {k.name}: more than {limit} instructions per wave (endless loop?)")
    op = inst.name
    if op == "s_endpgm": return count
    if op in ("s_branch", "s_cbranch_scc0", "s_cbranch_scc1"):
      taken = True if op == "s_branch" else None if scc is None else bool(scc) == op.endswith("1")
      if taken is None: raise NotCountable(f"kernel {k.name}: {inst} at {inst.offset:#x} depends on an unknown value")
      if taken:
        rel = inst.fields["simm16"] & 0xFFFF
        target = inst.offset + 4 + 4 * (rel - 0x10000 if rel & 0x8000 else rel)
        if target not in at: raise NotCountable(f"kernel {k.name}: {inst} at {inst.offset:#x} leaves the kernel")
        i = at[target]
        continue
    elif op.startswith(("s_cbranch", "s_setpc", "s_swappc", "s_call", "s_rfe")):
      raise NotCountable(f"kernel {k.name}: {inst} at {inst.offset:#x}: the path depends on the lanes or the data")
    else: scc = _step(inst, sgprs, scc)
    i += 1


def kernel_waves(blob: bytes, name: str | None, groups: int, group_size: int) -> int:
  """Waves of a dispatch of `groups` work-groups of `group_size` threads (the kernel's wave size: 32 or 64)."""
  _, k = _kernel(blob, name)
  return groups * -(-group_size // k.wavefront_size)
