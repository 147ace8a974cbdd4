"""SDMA packets (sdma 6.0, gfx11; SDMA 7.0 of gfx12 emits the same; SDMA 4.x of gfx942 with the differences in
SDMAVersion) as lists of dwords.

Source: Linux drivers/gpu/drm/amd/amdgpu/sdma_v6_0_0_pkt_open.h (SDMA_OP_*, SDMA_SUBOP_*, and the
SDMA_PKT_<packet>_<dword>_<field>_shift/_mask values used below). They are written out here because importing the
generated hcq.autogen.amd.sdma costs more start-up time than the whole launch path may take; tests/amd/test_packets.py
checks every one of them against that generated module."""
from __future__ import annotations

from dataclasses import dataclass

from ...errors import DeviceError
from ..hcq.cmdbuf import hi, lo
from .decoding import DecodeError

# SDMA_OP_* / SDMA_SUBOP_*
OP_NOP, OP_COPY, OP_WRITE, OP_INDIRECT, OP_FENCE = 0, 1, 2, 4, 5
OP_TRAP, OP_POLL_REGMEM, OP_CONST_FILL, OP_TIMESTAMP, OP_GCR_REQ = 6, 8, 11, 13, 17
SUBOP_COPY_LINEAR, SUBOP_WRITE_LINEAR, SUBOP_TIMESTAMP_GET_GLOBAL = 0, 0, 2
# header: op [7:0], sub_op [15:8] (every SDMA_PKT_*_HEADER_op/sub_op); FENCE mtype [18:16]; POLL_REGMEM func [30:28],
# mem_poll [31]; POLL_REGMEM DW5 interval [15:0], retry_count [27:16]; TRAP INT_CONTEXT int_context [27:0]
SUB_OP_SHIFT, FENCE_MTYPE_SHIFT, POLL_FUNC_SHIFT, POLL_MEM_POLL_SHIFT = 8, 16, 28, 31
POLL_INTERVAL_MASK, POLL_RETRY_SHIFT, POLL_RETRY_MASK, TRAP_CONTEXT_MASK = 0xFFFF, 16, 0xFFF, 0x0FFFFFFF
COPY_COUNT_MASK = 0x3FFFFFFF
OP_NAMES = {OP_NOP: "NOP", OP_COPY: "COPY", OP_WRITE: "WRITE", OP_INDIRECT: "INDIRECT", OP_FENCE: "FENCE",
            OP_TRAP: "TRAP", OP_POLL_REGMEM: "POLL_REGMEM", OP_CONST_FILL: "CONST_FILL", OP_TIMESTAMP: "TIMESTAMP",
            OP_GCR_REQ: "GCR_REQ"}
MAX_COPY = COPY_COUNT_MASK + 1   # COPY_LINEAR count = bytes - 1
FENCE_MTYPE_UC = 3     # SDMA_PKT_FENCE_HEADER_mtype: 3 = uncached
POLL_FUNC_GE = 5       # SDMA_PKT_POLL_REGMEM_HEADER_func: 5 = greater or equal
POLL_FUNC_EQ = 3       # 3 = equal (the WAIT_REG_MEM function numbering: nvd.h)




@dataclass(frozen=True)
class SDMAVersion:
  """What differs between the SDMA packet headers of linux 6.12 for the packets hcq sends: vega10_sdma_pkt_open.h
  (SDMA 4.x: sdma_v4_0.c and sdma_v4_4_2.c, gfx942's, include it) has a 22-bit COPY_LINEAR count and no FENCE mtype
  field; sdma_v6_0_0_pkt_open.h (sdma_v6_0.c and sdma_v7_0.c include it) a 30-bit count and mtype. Written out like
  the opcodes above; tests/amd/test_packets.py checks them against amd.sdma_4 and amd.sdma."""
  major: int
  max_copy: int         # bytes per COPY_LINEAR: SDMA_PKT_COPY_LINEAR_COUNT_count_mask + 1
  fence_mtype: bool     # SDMA_PKT_FENCE_HEADER_mtype exists


SDMA_VERSIONS = {4: SDMAVersion(4, 0x003FFFFF + 1, False), 6: SDMAVersion(6, COPY_COUNT_MASK + 1, True)}


def sdma_version(ip: tuple) -> SDMAVersion:
  """The packet facts of SDMA IP version ip: the greatest known major not above it (7.x takes 6's, as sdma_v7_0.c
  does; 5.x, whose navi10 header hcq does not generate, takes 4's narrower count, which is safe for it)."""
  fits = [m for m in SDMA_VERSIONS if m <= ip[0]]
  if not fits: raise ValueError(f"SDMA {'.'.join(map(str, ip))}: no known packet layout (hcq knows SDMA 4 and 6)")
  return SDMA_VERSIONS[max(fits)]


def copy_linear(dst: int, src: int, nbytes: int, max_copy: int = MAX_COPY) -> list[int]:
  """One COPY_LINEAR of 1..max_copy bytes (the version's count width)."""
  if not 0 < nbytes <= max_copy: raise ValueError(f"SDMA copy of {nbytes} bytes (1..{max_copy} per packet)")
  return [OP_COPY | (SUBOP_COPY_LINEAR << SUB_OP_SHIFT), (nbytes - 1) & COPY_COUNT_MASK, 0, lo(src), hi(src), lo(dst), hi(dst)]


def copy(dst: int, src: int, nbytes: int, max_copy: int = MAX_COPY) -> list[int]:
  out = []
  for off in range(0, nbytes, max_copy): out += copy_linear(dst + off, src + off, min(max_copy, nbytes - off), max_copy)
  return out


def write_linear(addr: int, dwords) -> list:
  """WRITE_LINEAR (untiled): the dwords stored at addr (amdgpu sdma_v6_0.c sdma_v6_0_ring_test_ring: header
  OP_WRITE / SUBOP_WRITE_LINEAR, address, COUNT = dwords - 1, data)."""
  dwords = list(dwords)
  if not dwords: raise DeviceError("SDMA WRITE_LINEAR needs at least one dword")
  return [OP_WRITE | (SUBOP_WRITE_LINEAR << 8), lo(addr), hi(addr), len(dwords) - 1, *dwords]


def fence(addr: int, value: int, mtype: bool = True) -> list[int]:
  """Write 32 bits after prior packets complete (uncached where the header has an mtype field)."""
  return [OP_FENCE | ((FENCE_MTYPE_UC << FENCE_MTYPE_SHIFT) if mtype else 0), lo(addr), hi(addr), lo(value)]


def trap(int_context: int) -> list[int]:
  """Raise an interrupt carrying int_context (28 bits: the KFD event id)."""
  return [OP_TRAP, int_context & TRAP_CONTEXT_MASK]


def poll_regmem(addr: int, value: int, mask: int = 0xFFFFFFFF, func: int = POLL_FUNC_GE, interval: int = 4,
                retry: int = 0xFFF) -> list[int]:
  """Wait until (mem32[addr] & mask) func value."""
  hdr = OP_POLL_REGMEM | (func << POLL_FUNC_SHIFT) | (1 << POLL_MEM_POLL_SHIFT)
  return [hdr, lo(addr), hi(addr), lo(value), mask,
          (interval & POLL_INTERVAL_MASK) | ((retry & POLL_RETRY_MASK) << POLL_RETRY_SHIFT)]


def timestamp(addr: int) -> list[int]:
  """Write the 64-bit global timestamp to addr."""
  return [OP_TIMESTAMP | (SUBOP_TIMESTAMP_GET_GLOBAL << SUB_OP_SHIFT), lo(addr), hi(addr)]


def indirect(addr: int, size_dw: int) -> list[int]:
  return [OP_INDIRECT, lo(addr), hi(addr), size_dw, 0, 0]


def nop() -> list[int]: return [OP_NOP]


# ---- decoding
_SIZES = {OP_COPY: 7, OP_FENCE: 4, OP_TRAP: 2, OP_POLL_REGMEM: 6, OP_TIMESTAMP: 3, OP_INDIRECT: 6, OP_CONST_FILL: 5,
          OP_GCR_REQ: 5}


def _size(words, i: int) -> int:
  h = words[i]
  op = h & 0xFF
  if op == OP_NOP: return 1 + ((h >> 16) & 0x3FFF)  # SDMA_PKT_NOP_HEADER_count (14 bits at 16): extra dwords
  if op == OP_WRITE: return 4 + ((words[i + 3] & 0xFFFFF) + 1 if i + 3 < len(words) else 0)
  if op in _SIZES: return _SIZES[op]
  raise ValueError(f"dword {i}: unknown SDMA opcode {op} (header {h:#010x})")


def decode(words) -> list[tuple[int, str, list[str]]]:
  """(dword offset, packet name, fields) for each packet of an SDMA stream. Raises DecodeError (a ValueError holding
  the packets before it) at an unknown opcode or a truncated packet, naming the offset."""
  out, i, n = [], 0, len(words)
  while i < n:
    h = words[i]
    try: size = _size(words, i)
    except ValueError as e: raise DecodeError(str(e), out) from None
    if i + size > n: raise DecodeError(f"dword {i}: SDMA {OP_NAMES.get(h & 0xFF)} needs {size} dwords, the stream has {n - i}", out)
    b = list(words[i:i + size])
    op, sub = h & 0xFF, (h >> 8) & 0xFF
    def a(j): return f"{b[j] | (b[j + 1] << 32):#x}"
    if op == OP_COPY and sub == SUBOP_COPY_LINEAR: name, f = "COPY_LINEAR", [f"bytes={b[1] + 1}", f"src={a(3)}", f"dst={a(5)}"]
    elif op == OP_FENCE: name, f = "FENCE", [f"mtype={(h >> 16) & 7}", f"addr={a(1)}", f"data={b[3]:#x}"]
    elif op == OP_TRAP: name, f = "TRAP", [f"int_context={b[1]:#x}"]
    elif op == OP_POLL_REGMEM:
      fn = ("always", "<", "<=", "==", "!=", ">=", ">", "?")[(h >> 28) & 7]
      name, f = "POLL_REGMEM", [f"function={fn}", f"mem_poll={h >> 31}", f"addr={a(1)}", f"value={b[3]:#x}",
                                f"mask={b[4]:#x}", f"interval={b[5] & 0xFFFF}", f"retry={(b[5] >> 16) & 0xFFF:#x}"]
    elif op == OP_TIMESTAMP and sub == SUBOP_TIMESTAMP_GET_GLOBAL: name, f = "TIMESTAMP_GET_GLOBAL", [f"addr={a(1)}"]
    elif op == OP_INDIRECT: name, f = "INDIRECT", [f"ib_addr={a(1)}", f"size_dw={b[3]}"]
    elif op == OP_WRITE: name, f = "WRITE_LINEAR", [f"dst={a(1)}", f"count={b[3] + 1}"] + [f"{v:#x}" for v in b[4:]]
    elif op == OP_NOP: name, f = "NOP", [f"count={size - 1}"] if size > 1 else []
    else: name, f = OP_NAMES.get(op, f"OP_{op}"), [f"{v:#x}" for v in b[1:]]
    out.append((i, name, f))
    i += size
  return out
