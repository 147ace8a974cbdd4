"""The SDMA engine of the mock (SDMA 6.0 packet layouts, sdma_v6_0_0_pkt_open.h in linux 6.12; a gfx942's SDMA 4.4.2
differs in the COPY_LINEAR count width, regs.SDMA_COPY_COUNT_MASKS).

The ring's read and write pointers count bytes. Packets: NOP (with a count of payload dwords), COPY_LINEAR,
WRITE_UNTILED, INDIRECT, FENCE, TRAP, POLL_REGMEM (blocks the queue until memory matches), CONST_FILL, TIMESTAMP
(set/get/get-global), GCR_REQ (no cache to maintain). Anything else is a QueueError naming the opcode and the ring
offset; a bad address is a GPUFault.
"""
from __future__ import annotations

from ...errors import QueueError
from . import regs as R
from .pm4 import Frame, compare

MAX_IB_DEPTH = 1
MAX_PACKETS_PER_RUN = 1 << 16

# packet sizes in dwords for fixed-size packets (sdma_v6_0_0_pkt_open.h: the _offset of each packet's last dword + 1)
_SIZES = {(R.SDMA_COPY, R.SDMA_SUBOP_COPY_LINEAR): 7, (R.SDMA_INDIRECT, 0): 6, (R.SDMA_FENCE, 0): 4, (R.SDMA_TRAP, 0): 2,
          (R.SDMA_POLL_REGMEM, 0): 6, (R.SDMA_CONST_FILL, 0): 5, (R.SDMA_TIMESTAMP, R.SDMA_SUBOP_TIMESTAMP_SET): 3,
          (R.SDMA_TIMESTAMP, R.SDMA_SUBOP_TIMESTAMP_GET): 3, (R.SDMA_TIMESTAMP, R.SDMA_SUBOP_TIMESTAMP_GET_GLOBAL): 3,
          (R.SDMA_GCR, 0): 5}



def copy_count_mask(ip: tuple) -> int:
  """COPY_LINEAR's count mask of SDMA version ip: the greatest listed major not above it (as the driver picks its
  packet facts: 5.x takes 4's, 7.x its own); a version below every listed one is an error naming it."""
  fits = [m for m in R.SDMA_COPY_COUNT_MASKS if m <= ip[0]]
  if not fits: raise ValueError(f"mock SDMA {'.'.join(map(str, ip))}: no COPY_LINEAR count width known (SDMA 4, 6, 7)")
  return R.SDMA_COPY_COUNT_MASKS[max(fits)]

class SDMAEngine:
  def __init__(self, gpu, queue):
    self.gpu, self.queue = gpu, queue
    self.frames: list[Frame] = []
    self.blocked_on: str | None = None
    self.packets = 0
    self.max_packets = MAX_PACKETS_PER_RUN
    self.timestamp_offset = 0
    self.copy_count_mask = copy_count_mask(gpu.props.ip_versions["SDMA0"])   # the part's SDMA version

  def _ring_offset(self, frame: Frame, pos: int) -> int:
    return (pos % frame.size_dw) * 4 if frame.ring else frame.ring_offset

  def _error(self, frame: Frame, pos: int, message: str, opcode: int | None) -> QueueError:
    where = "" if frame.ring else f" (in the indirect buffer at {frame.base:#x}, dword {pos})"
    return QueueError(self.queue.name, message + where, opcode=opcode, offset=self._ring_offset(frame, pos))

  def _read(self, frame: Frame, pos: int, count: int) -> list[int]:
    if not frame.ring: return self.gpu.mem.read_dwords(frame.base + 4 * pos, count, f"{self.queue.name} IB")
    start = pos % frame.size_dw
    if start + count > frame.size_dw:   # SDMA packets never wrap: the driver pads the ring's tail with NOPs
      raise self._error(frame, pos, f"packet of {count} dwords straddles the end of the ring", None)
    return self.gpu.mem.read_dwords(frame.base + 4 * start, count, f"{self.queue.name} ring")

  def _size(self, frame: Frame, pos: int, header: int) -> int:
    op, sub = header & 0xFF, (header >> 8) & 0xFF
    if op == R.SDMA_NOP: return 1 + ((header >> 16) & 0x3FFF)
    if op == R.SDMA_WRITE and sub == R.SDMA_SUBOP_WRITE_LINEAR:
      if frame.pos + 4 > frame.end: return 4
      (dw3,) = self._read(frame, pos + 3, 1)
      return 4 + (dw3 & 0xFFFFF) + 1
    size = _SIZES.get((op, sub))
    if size is None:
      name = R.SDMA_NAMES.get(op, "unknown")
      raise self._error(frame, pos, f"SDMA opcode {op:#x} ({name}) sub-op {sub:#x} is not supported "
                                    f"(header {header:#010x})", op)
    return size

  def run(self) -> bool:
    progress = False
    budget = self.max_packets
    while self.frames and budget > 0:
      budget -= 1
      frame = self.frames[-1]
      if frame.pos >= frame.end:
        if frame.ring: break
        self.frames.pop()
        progress = True
        continue
      (header,) = self._read(frame, frame.pos, 1)
      size = self._size(frame, frame.pos, header)
      if frame.pos + size > frame.end:
        if frame.ring and size < frame.size_dw: break
        raise self._error(frame, frame.pos, f"packet of {size} dwords runs past the end of the "
                                            f"{'ring' if frame.ring else 'indirect buffer'}", header & 0xFF)
      here = frame.pos
      pkt = self._read(frame, here, size)
      if not self._execute(pkt, frame, here): break
      if frame.pos == here: frame.pos += size
      self.blocked_on = None
      self.packets += 1
      progress = True
    return progress

  def _execute(self, p: list[int], frame: Frame, pos: int) -> bool:
    op, sub = p[0] & 0xFF, (p[0] >> 8) & 0xFF
    mem, what = self.gpu.mem, f"{self.queue.name} {R.SDMA_NAMES.get(op, hex(op))}"
    if op == R.SDMA_NOP or op == R.SDMA_GCR: return True
    if op == R.SDMA_COPY:
      size = (p[1] & self.copy_count_mask) + 1
      mem.copy(p[5] | (p[6] << 32), p[3] | (p[4] << 32), size, what)
    elif op == R.SDMA_WRITE:
      dst = (p[1] & ~3) | (p[2] << 32)
      mem.write_bytes(dst, b"".join(v.to_bytes(4, "little") for v in p[4:]), what)
    elif op == R.SDMA_FENCE: mem.write32((p[1] & ~3) | (p[2] << 32), p[3], what)
    elif op == R.SDMA_TRAP: self.gpu.interrupt(self.queue, p[1] & 0x0FFFFFFF)
    elif op == R.SDMA_POLL_REGMEM:
      hdp_flush, function, mem_poll = (p[0] >> 26) & 1, (p[0] >> 28) & 7, p[0] >> 31
      if hdp_flush: return True             # an HDP flush: host writes are visible at once in the mock
      if function == 7: raise self._error(frame, pos, "POLL_REGMEM with reserved compare function 7", op)
      if mem_poll:
        addr = (p[1] & ~3) | (p[2] << 32)
        value, where = mem.read32(addr, what), f"memory {addr:#x}"
      else:
        value, where = self.gpu.read_reg((p[1] >> 2) & 0x3FFFF), f"register {(p[1] >> 2) & 0x3FFFF:#x}"
      if compare(function, value & p[4], p[3]): return True
      self.blocked_on = f"POLL_REGMEM: {where} & {p[4]:#x} {R.WAIT_FUNCTIONS[function]} {p[3]:#x} (now {value & p[4]:#x})"
      return False
    elif op == R.SDMA_CONST_FILL:
      fill_size = (p[0] >> 30) & 3      # SDMA_PKT_CONSTANT_FILL_HEADER_fillsize: 1 << n bytes of the pattern
      width = 1 << fill_size
      if width == 8: raise self._error(frame, pos, "CONST_FILL fill size 3 is not supported", op)
      size = (p[4] & 0x3FFFFFFF) + 1
      mem.fill(p[1] | (p[2] << 32), (p[3] & ((1 << (8 * width)) - 1)).to_bytes(width, "little"), size, what)
    elif op == R.SDMA_TIMESTAMP:
      if sub == R.SDMA_SUBOP_TIMESTAMP_SET: self.timestamp_offset = (p[1] | (p[2] << 32)) - self.gpu.clock()
      else:
        base = 0 if sub == R.SDMA_SUBOP_TIMESTAMP_GET_GLOBAL else self.timestamp_offset
        mem.write64((p[1] & ~7) | (p[2] << 32), self.gpu.clock() + base, what)
    elif op == R.SDMA_INDIRECT:
      depth = sum(1 for f in self.frames if not f.ring)
      if depth >= MAX_IB_DEPTH: raise self._error(frame, pos, "SDMA INDIRECT inside an indirect buffer", op)
      frame.pos = pos + 6
      size = p[3] & 0xFFFFF
      if size:
        addr = (p[1] & ~3) | (p[2] << 32)
        mem.check(addr, 4 * size, f"{self.queue.name} indirect buffer")
        self.frames.append(Frame(addr, size, 0, size, False, self._ring_offset(frame, pos), "IB"))
    return True
