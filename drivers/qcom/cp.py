"""Adreno CP (command processor) streams as data: type-4 and type-7 packets, their builders and a decoder.

Formats (Adreno 5xx and later; Mesa's adreno_pm4.xml names the packet types CP_TYPE4_PKT = 0x40000000 and
CP_TYPE7_PKT = 0x70000000; the header layouts are those of freedreno's pm4 headers):
  type 4 (write `count` consecutive registers from `reg`): 0x40000000 | count[6:0] | odd_parity(count) << 7 |
         reg[17:0] << 8 | odd_parity(reg) << 27, then `count` values
  type 7 (an opcode packet):  0x70000000 | count[13:0] | odd_parity(count) << 15 | opcode[6:0] << 16 |
         odd_parity(opcode) << 23, then `count` body dwords
odd_parity(v) is the bit that makes the number of ones in v's nibbles plus itself odd: the 4-bit xor-fold of v
looked up in the constant 0x9669 (~0x6996: bit n set when n has an even number of ones).

Builders take ints or cmdbuf Syms (addresses known at submit) and return word lists; decode() names packets by the
adreno_pm4 opcode enum and registers by the a6xx register table."""
from __future__ import annotations

from ..hcq.cmdbuf import hi, lo

TYPE4, TYPE7 = 0x40000000, 0x70000000
TYPE4_MAX = 0x7F                 # registers in one type-4 packet
TYPE7_MAX = 0x3FFF               # body dwords in one type-7 packet


def _pm4():
  from ...autogen.qcom import adreno_pm4
  return adreno_pm4


def odd_parity(v: int) -> int:
  """The parity bit of a header field: 1 when v has an even number of set bits (so that the total is odd)."""
  v ^= v >> 16
  v ^= v >> 8
  v ^= v >> 4
  return (0x9669 >> (v & 0xF)) & 1


def pkt4(reg: int, *values) -> list:
  """Write values to the consecutive registers from reg (dword offsets)."""
  n = len(values)
  if not 0 < n <= TYPE4_MAX: raise ValueError(f"a type-4 packet writes 1..{TYPE4_MAX} registers, not {n}")
  if not 0 <= reg < 1 << 18: raise ValueError(f"register offset {reg:#x} does not fit 18 bits")
  return [TYPE4 | n | odd_parity(n) << 7 | reg << 8 | odd_parity(reg) << 27, *values]


def pkt7(opcode: int, *body) -> list:
  n = len(body)
  if n > TYPE7_MAX: raise ValueError(f"a type-7 packet carries at most {TYPE7_MAX} dwords, not {n}")
  if not 0 <= opcode < 0x80: raise ValueError(f"opcode {opcode:#x} does not fit 7 bits")
  return [TYPE7 | n | odd_parity(n) << 15 | opcode << 16 | odd_parity(opcode) << 23, *body]


# ---- the packets hcq uses (opcodes and field values from the adreno_pm4 rnndb module)
def op(name: str) -> int: return _pm4().ENUMS["adreno_pm4_type3_packets"][name]


def mem_write(addr, *values) -> list:
  """CP_MEM_WRITE: dwords to memory."""
  return pkt7(op("CP_MEM_WRITE"), lo(addr), hi(addr), *values)


def wait_reg_mem_ge(addr, ref, mask: int = 0xFFFFFFFF, delay: int = 16) -> list:
  """CP_WAIT_REG_MEM: stall until (mem32[addr] & mask) >= ref (unsigned, function WRITE_GE, polling memory: POLL =
  POLL_MEMORY, Mesa 25's adreno_pm4.xml; the one-bit POLL_MEMORY flag of Mesa 22 is the same bit)."""
  p = _pm4()
  return pkt7(op("CP_WAIT_REG_MEM"), p.CP_WAIT_REG_MEM_0_FUNCTION(p.WRITE_GE) | p.CP_WAIT_REG_MEM_0_POLL(p.POLL_MEMORY),
              lo(addr), hi(addr), p.CP_WAIT_REG_MEM_3_REF(ref) if isinstance(ref, int) else ref, mask, delay)


def reg_to_mem(reg: int, addr, count: int = 2, is64: bool = True) -> list:
  """CP_REG_TO_MEM: count registers from reg into memory (as one 64-bit value with is64)."""
  p = _pm4()
  w0 = p.CP_REG_TO_MEM_0_REG(reg) | p.CP_REG_TO_MEM_0_CNT(count) | (p.CP_REG_TO_MEM_0_64B if is64 else 0)
  return pkt7(op("CP_REG_TO_MEM"), w0, lo(addr), hi(addr))


def event_write(event: int, addr=None, value=None) -> list:
  """CP_EVENT_WRITE: an event; with addr, a timestamp event (CACHE_FLUSH_TS: after the caches are flushed) that
  writes the packet's `value` there once the work before it is done.

  TIMESTAMP (bit 30) stays clear: adreno_pm4.xml's CP_EVENT_WRITE domain says that bit writes back the GPU's
  timestamp instead of the packet's value (Mesa sets it only to record GPU time); computerator's event_write()
  (src/freedreno/computerator/a6xx.c) and tinygrad's QCOM signal() write fence values without it."""
  p = _pm4()
  if addr is None: return pkt7(op("CP_EVENT_WRITE"), p.CP_EVENT_WRITE_0_EVENT(event))
  return pkt7(op("CP_EVENT_WRITE"), p.CP_EVENT_WRITE_0_EVENT(event), lo(addr), hi(addr), value)


SHADER_PRELOAD_A6XX_GEN1 = 64     # instr_cache_size of a6xx gen1 (a630): Mesa src/freedreno/common/freedreno_devices.py


def load_state6(state_type: int, block: int, units: int, src_addr=None, payload=(), dst_off: int = 0) -> list:
  """CP_LOAD_STATE6_FRAG (the compute stage's state): `units` units of state (shader: 128-byte groups; constants:
  vec4s; IBO descriptors: 16 dwords) from memory at src_addr (SS6_INDIRECT) or from the payload (SS6_DIRECT).
  NUM_UNIT is a 10-bit field (adreno_pm4.xml CP_LOAD_STATE6_0, bits 31:22): more units is a clear error, never a
  truncated field."""
  p = _pm4()
  top = p.CP_LOAD_STATE6_0_NUM_UNIT__MASK >> p.CP_LOAD_STATE6_0_NUM_UNIT__SHIFT
  if not 0 <= units <= top:
    raise ValueError(f"CP_LOAD_STATE6: {units} units do not fit NUM_UNIT (at most {top})")
  src = p.SS6_DIRECT if src_addr is None else p.SS6_INDIRECT
  w0 = p.CP_LOAD_STATE6_0_DST_OFF(dst_off) | p.CP_LOAD_STATE6_0_STATE_TYPE(state_type) | \
    p.CP_LOAD_STATE6_0_STATE_SRC(src) | p.CP_LOAD_STATE6_0_STATE_BLOCK(block) | p.CP_LOAD_STATE6_0_NUM_UNIT(units)
  if src_addr is None: return pkt7(op("CP_LOAD_STATE6_FRAG"), w0, 0, 0, *payload)
  return pkt7(op("CP_LOAD_STATE6_FRAG"), w0, lo(src_addr), hi(src_addr))


def exec_cs(x: int, y: int, z: int) -> list:
  return pkt7(op("CP_EXEC_CS"), 0, x, y, z)


def indirect_buffer(addr, dwords: int) -> list:
  """CP_INDIRECT_BUFFER: run `dwords` dwords of packets at addr, then continue here."""
  return pkt7(op("CP_INDIRECT_BUFFER"), lo(addr), hi(addr), dwords)


def wait_for_idle() -> list: return pkt7(op("CP_WAIT_FOR_IDLE"))


def wait_mem_writes() -> list: return pkt7(op("CP_WAIT_MEM_WRITES"))


def set_marker(mode: int) -> list: return pkt7(op("CP_SET_MARKER"), mode)


# ---- decoding
class DecodeError(ValueError):
  """A stream that cannot be decoded past some dword; .packets holds those decoded before it."""

  def __init__(self, message: str, packets: list):
    super().__init__(message)
    self.packets = packets


_NAMES: dict = {}


def opcode_name(opcode: int) -> str:
  if not _NAMES:
    for name, v in _pm4().ENUMS["adreno_pm4_type3_packets"].items(): _NAMES.setdefault(v, name)
    # a6xx's names where older generations reused the number
    for name in ("CP_LOAD_STATE6_FRAG", "CP_LOAD_STATE6", "CP_LOAD_STATE6_GEOM", "CP_EXEC_CS", "CP_SET_MARKER",
                 "CP_MEM_WRITE", "CP_EVENT_WRITE", "CP_REG_TO_MEM", "CP_WAIT_REG_MEM"):
      _NAMES[op(name)] = name
  return _NAMES.get(opcode, f"CP_{opcode:#x}")


_REGS: dict = {}


def register_name(reg: int) -> str:
  if not _REGS:
    from ...autogen.qcom import a6xx
    for r in a6xx.REGISTERS.values():
      if not r.stride: _REGS.setdefault(r.offset, r.name.removeprefix("REG_A6XX_"))
  return _REGS.get(reg, f"REG_{reg:#x}")


def header_fields(h: int) -> tuple[str, int, int]:
  """("type4", reg, count) or ("type7", opcode, count); raises ValueError for another header or bad parity."""
  if h & 0xF0000000 == TYPE4:
    n, reg = h & 0x7F, (h >> 8) & 0x3FFFF
    if (h >> 7) & 1 != odd_parity(n) or (h >> 27) & 1 != odd_parity(reg):
      raise ValueError(f"{h:#010x}: type-4 header with bad parity")
    return "type4", reg, n
  if h & 0xF0000000 == TYPE7:
    n, opc = h & 0x3FFF, (h >> 16) & 0x7F
    if (h >> 15) & 1 != odd_parity(n) or (h >> 23) & 1 != odd_parity(opc) or h & 0x0F000000:
      raise ValueError(f"{h:#010x}: type-7 header with bad parity")
    return "type7", opc, n
  raise ValueError(f"{h:#010x} is neither a type-4 nor a type-7 header")


def decode(words) -> list[tuple[int, str, list[str]]]:
  """(dword offset, packet name, fields) for each packet; a type-4 packet is shown as its register writes."""
  out, i, n = [], 0, len(words)
  while i < n:
    try: kind, what, count = header_fields(words[i])
    except ValueError as e: raise DecodeError(f"dword {i}: {e}", out) from None
    if i + 1 + count > n:
      raise DecodeError(f"dword {i}: the packet needs {count} body dwords, the stream has {n - i - 1}", out)
    body = list(words[i + 1:i + 1 + count])
    if kind == "type4":
      out.append((i, "PKT4", [f"{register_name(what + k)}={v:#x}" for k, v in enumerate(body)]))
    else:
      out.append((i, opcode_name(what), [f"{v:#x}" for v in body]))
    i += 1 + count
  return out
