"""The PM4 command processor of the mock gfx1100 (a compute queue's ME): packets from a ring and from indirect
buffers, resumable at a packet that waits (WAIT_REG_MEM) until the memory it polls changes, and at a DISPATCH_DIRECT
whose dispatch ran out of its time slice (the engine keeps it as `running`; the next run() resumes it first).

Packet layouts: nvd.h and soc15d.h (Linux 6.12, drivers/gpu/drm/amd/amdgpu), PACKET3 headers and each packet's dwords.
Anything the processor cannot execute (a type-0/1 packet, an unknown opcode, a register outside its window, a
packet running past the end of its IB) is a QueueError naming the opcode and the ring offset; a memory access
outside the GPU's mappings is a GPUFault with the address. Neither escapes as another exception type.
"""
from __future__ import annotations

from array import array
from dataclasses import dataclass
from operator import itemgetter
from struct import Struct

from ...errors import QueueError
from . import regs as R

MAX_IB_DEPTH = 4      # ring -> IB -> chained IBs; deeper nesting is a queue error
MAX_PACKETS_PER_RUN = 1 << 16   # a run() yields after this many packets (the queue stays runnable)
IB_PLAN_MAX_DWORDS = 4096       # indirect buffers up to this size keep their parse (see PM4Engine._ib_plan)
IB_PLAN_CACHE_ENTRIES = 64        # per queue: at most ~6 MB even with every entry a 4096-dword IB
_SH_WINDOW = R.SET_SH_REG_END - R.SET_SH_REG_START
_TYPE_OPCODE = 0xC000FF00    # a PM4 header's packet type (bits 31:30) and opcode (bits 15:8)
# 1 at the SH offsets DISPATCH_DIRECT converts into its launch state (a write elsewhere keeps PM4Engine.launch_state)
_LAUNCH_REGS = bytearray(_SH_WINDOW)
for _reg in R.LAUNCH_STATE_REGS + R.LAUNCH_STATE_REGS_GFX9: _LAUNCH_REGS[_reg] = 1
_USER_LO, _USER_HI = R.COMPUTE_USER_DATA_0, R.COMPUTE_USER_DATA_0 + R.NUM_USER_DATA   # SH offsets of the user data
# packets whose handlers neither move the stream's position nor push a frame: a run of ring packets made only of these
# is decoded once per distinct header sequence (PM4Engine._sequence); INDIRECT_BUFFER and PRED_EXEC go the general way
_SEQUENCE_OPCODES = frozenset((R.PM4_NOP, R.PM4_SET_SH_REG, R.PM4_SET_UCONFIG_REG, R.PM4_DISPATCH_DIRECT,
                               R.PM4_WAIT_REG_MEM, R.PM4_RELEASE_MEM, R.PM4_EVENT_WRITE, R.PM4_ACQUIRE_MEM,
                               R.PM4_WRITE_DATA, R.PM4_COPY_DATA))
SEQUENCE_CACHE_ENTRIES = 64     # per queue, by the length of the run
_DATA_32, _DATA_64 = R.RELEASE_DATA_32, R.RELEASE_DATA_64     # RELEASE_MEM's data_sel of every fence


@dataclass(slots=True)
class Frame:
  """A dword stream being executed: the ring (positions grow forever, read modulo its size) or a buffer."""
  base: int
  size_dw: int        # ring size (ring) or buffer length
  pos: int            # next dword to execute
  end: int            # one past the last dword available
  ring: bool
  ring_offset: int    # byte offset in the ring of the packet that started this frame (IBs), else 0
  what: str
  cache: list | None = None   # dwords [cache_pos, cache_end) read ahead (the CP prefetches too)
  cache_pos: int = 0
  cache_end: int = 0
  plan: dict | None = None    # IBs: packet start -> (opcode, body, next position), parsed once per content
  view: memoryview | None = None   # rings: u32 view of the whole ring, checked against the mappings `view_version`
  view_version: int | None = None

  def prefetch(self, mem, owner: str) -> None:
    """Read the dwords from pos to end in one checked access (at most to the ring's end; the wrapped rest is read
    on demand). owner: the queue's name (errors name it and the frame). A ring mapped whole is read through a view
    checked once per mapping change."""
    pos, size = self.pos, self.size_dw
    n = self.end - pos
    if n <= 0: return
    start = pos % size if self.ring else pos
    if n > size - start: n = size - start
    if self.ring:
      view = self.view
      if view is None or self.view_version != mem.ranges.generation:    # mem.version(), without the call
        view = self.view = None
        if mem.mapped(self.base, 4 * size):
          version = mem.version()
          view = self.view = mem.u32_view(self.base, size, f"{owner} {self.what}")
          self.view_version = version
      if view is not None:
        self.cache, self.cache_pos, self.cache_end = view[start:start + n].tolist(), pos, pos + n
        return
    self.cache, self.cache_pos, self.cache_end = mem.read_dwords(self.base + 4 * start, n, f"{owner} {self.what}"), \
      pos, pos + n


def compare(function: int, value: int, ref: int) -> bool:
  """WAIT_REG_MEM / POLL_REGMEM compare functions (nvd.h WAIT_REG_MEM_FUNCTION): 0 always, 1 <, 2 <=, 3 ==, 4 !=,
  5 >=, 6 >; 7 is reserved."""
  if function == 0: return True
  if function == 1: return value < ref
  if function == 2: return value <= ref
  if function == 3: return value == ref
  if function == 4: return value != ref
  if function == 5: return value >= ref
  if function == 6: return value > ref
  raise ValueError(function)


class PM4Engine:
  """Executes PM4 packets for one queue. `gpu` provides mem (DeviceMemory), read_reg/write_reg, clock(),
  interrupt(queue, ctxid), dispatch_direct(queue, sh, grid, initiator, launch state, user data) -> (launch state,
  None or a suspended dispatch) and resume(suspended dispatch) -> ended."""

  def __init__(self, gpu, queue):
    self.gpu, self.queue = gpu, queue
    self.sh: dict[int, int] = {}           # SET_SH_REG offsets -> values (the queue's compute pipe state)
    # kept beside sh for DISPATCH_DIRECT: the 16 user data registers, and the launch state the GPU converted from the
    # other SH registers at the last dispatch (None: an SH register outside the user data was written since)
    self.user_data = [0] * R.NUM_USER_DATA
    self.launch_state: tuple | None = None
    self.uconfig: dict[int, int] = {}
    self.frames: list[Frame] = []
    self.blocked_on: str | None = None     # what the current packet waits for
    # a DISPATCH_DIRECT whose dispatch has not ended after its time slice: (the suspended dispatch, its frame, the
    # position after its packet); the frame stays at the packet until the dispatch ends
    self.running: tuple | None = None
    self.packets = 0
    self.max_packets = MAX_PACKETS_PER_RUN
    self._release_what = f"{queue.name} RELEASE_MEM"     # formatted once: RELEASE_MEM runs on every launch
    self._ib_what = f"{queue.name} indirect buffer"
    self._ib_plans: dict[bytes, dict] = {}
    self._seqs: tuple = (None, {})         # (HANDLERS they were decoded with, run length -> sequence; see _sequence)
    self._mem = gpu.mem

  # ---- stream access
  def _ring_offset(self, frame: Frame, pos: int) -> int:
    return (pos % frame.size_dw) * 4 if frame.ring else frame.ring_offset

  def _error(self, frame: Frame, pos: int, message: str, opcode: int | None) -> QueueError:
    where = "" if frame.ring else f" (in {frame.what} at {frame.base:#x}, dword {pos})"
    return QueueError(self.queue.name, message + where, opcode=opcode, offset=self._ring_offset(frame, pos))

  def _read(self, frame: Frame, pos: int, count: int) -> list[int]:
    cache = frame.cache
    if cache is not None and frame.cache_pos <= pos and pos + count <= frame.cache_pos + len(cache):
      return cache[pos - frame.cache_pos:pos - frame.cache_pos + count]
    if not frame.ring: return self.gpu.mem.read_dwords(frame.base + 4 * pos, count, f"{self.queue.name} {frame.what}")
    start = pos % frame.size_dw
    first = min(count, frame.size_dw - start)
    out = self.gpu.mem.read_dwords(frame.base + 4 * start, first, f"{self.queue.name} ring")
    if first < count: out += self.gpu.mem.read_dwords(frame.base, count - first, f"{self.queue.name} ring")
    return out

  # ---- execution
  def run(self) -> bool:
    """Execute packets until the frames are exhausted or a packet waits (or a dispatch runs out of its time slice).
    True when a packet completed."""
    frames = self.frames
    if not frames: return False
    if self.running is not None and not self._resume(): return False
    top = frames[-1]
    pos, end = top.pos, top.end
    if end > pos:
      # the ring's new packets, read ahead whole: a header sequence seen before runs without decoding (a launch)
      seqs, cache = self._seqs, None
      if seqs[0] is not self.HANDLERS: seqs = self._seqs = (self.HANDLERS, {})
      seq = seqs[1].get(end - pos)      # (the run's length: a read-ahead that is used is all of it)
      view = top.view
      if view is not None:
        # Frame.prefetch's common case inlined (every launch; only rings have a view): the view is valid for the
        # current mappings and the new packets do not wrap; a run of a length decoded before is read by its struct
        # (a tuple, faster than the view's tolist()). The frame's read-ahead fields are set when the general loop
        # needs them (below)
        size = top.size_dw
        start = pos % size
        if top.view_version == self._mem.ranges.generation and end - pos <= size - start:
          cache = view[start:end - pos + start].tolist() if seq is None else seq[4].unpack_from(view, 4 * start)
      if cache is None:
        top.prefetch(self._mem, self.queue.name)
        if top.ring and top.cache_end == end: cache = top.cache
      if cache is not None:
        if seq is None or seq[0](cache) != seq[1]:
          by_header = self._by_header
          seq = self._sequence(cache, (by_header if by_header[0] is seqs[0] else self._header_handlers())[1], seqs[1])
        if seq is not None and self.max_packets >= seq[2]:
          # the decoded run (_sequence), every packet's effect as the general loop has it: no-op packets only
          # counted, each other packet's handler called with its body; a handler that waits ends the run there (the
          # frame stays at its packet). An exception leaves the frame at the packet that raised it and counts none
          # of the run's packets, as the general loop does.
          at = before = 0
          try:
            for handler, at, body, opcode, before in seq[3]:
              if not handler(cache[body], top, pos + at, opcode):
                top.pos = pos + at
                if before: self.packets += before     # (the handler said what it waits for: blocked_on)
                return before > 0
          except BaseException:
            top.pos = pos + at
            if before: self.blocked_on = None
            raise
          top.pos = end
          self.blocked_on = None
          self.packets += seq[2]
          return True
        top.cache, top.cache_pos, top.cache_end = cache, pos, end
    budget = self.max_packets
    done = 0          # packets completed by this call (added to self.packets at the end, even on an error)
    progress = False
    try:
      while frames and budget > 0:
        other, budget, done, go_on = self._run_frame(frames, frames[-1], budget, done)
        progress |= other
        if not go_on: break
    finally:
      if done: self.packets += done
    return done > 0 or progress

  def _run_frame(self, frames: list, frame: Frame, budget: int, done: int):
    """Packets of the top frame until it ends, pushes a frame, or a packet waits: (progress other than packets
    (a frame popped, a type-2 filler), budget left, packets done, whether run() should look at the frames again).
    The hot loop of every launch: the frame's fields in locals, the prefetched dwords read without bounds calls."""
    handlers = self.HANDLERS
    by_header = self._by_header
    if by_header[0] is not handlers: by_header = self._header_handlers()
    by_header = by_header[1]
    plan, cache, cache_pos, cache_end, end = frame.plan, frame.cache, frame.cache_pos, frame.cache_end, frame.end
    progress = False
    while budget > 0:
      budget -= 1
      pos = frame.pos
      if pos >= end:
        if frame.ring: return progress, budget, done, False
        frames.pop()
        return True, budget, done, True
      handler = None
      if plan is None:
        if cache_pos <= pos < cache_end:
          # a type-3 packet with a handler, read ahead whole (cache_end <= end): found by its header's type and opcode
          # bits at once; anything else (fillers, errors, a packet past the read-ahead) goes the general way below
          header = cache[pos - cache_pos]
          handler = by_header.get(header & _TYPE_OPCODE)
          if handler is not None:
            nxt = pos + 2 + ((header >> 16) & 0x3FFF)
            if nxt > cache_end: handler = None
            elif handler is not _nop: body, opcode = cache[pos + 1 - cache_pos:nxt - cache_pos], (header >> 8) & 0xFF
      else:
        entry = plan.get(pos)
        if entry is not None:            # a packet of an IB parsed before: no decoding, the same handler call
          handler = handlers.get(entry[0])
          opcode, body, nxt = entry
      if handler is not None:
        if handler is not _nop:
          if not handler(self, body, frame, pos, opcode): return progress, budget, done, False
          if frame.pos == pos: frame.pos = nxt
        else: frame.pos = nxt
        if not done: self.blocked_on = None
        done += 1
        if frames[-1] is not frame: return progress, budget, done, True
        continue
      cached = cache is not None and cache_pos <= pos < cache_end
      header = cache[pos - cache_pos] if cached else self._read(frame, pos, 1)[0]
      kind = header >> 30
      if kind == 2:                      # type-2: a one-dword filler the CP skips
        frame.pos = pos + 1
        progress = True
        continue
      opcode = (header >> 8) & 0xFF
      if kind != 3:
        raise self._error(frame, pos, f"type-{kind} PM4 packet (header {header:#010x}) is not supported", opcode)
      count = ((header >> 16) & 0x3FFF) + 1
      nxt = pos + 1 + count
      if nxt > end:
        if frame.ring and count < frame.size_dw: return progress, budget, done, False   # the rest is not written yet
        raise self._error(frame, pos, f"packet of {count} body dwords runs past the end of the "
                                      f"{'ring' if frame.ring else frame.what}", opcode)
      handler = handlers.get(opcode)
      if handler is None:
        raise self._error(frame, pos, f"unknown PM4 opcode {opcode:#x} (header {header:#010x})", opcode)
      if cached and nxt <= cache_end:
        off = pos + 1 - cache_pos
        body = cache[off:off + count]
      else: body = self._read(frame, pos + 1, count)
      if not handler(self, body, frame, pos, opcode): return progress, budget, done, False
      if frame.pos == pos: frame.pos = nxt      # handlers that push a frame advanced the parent already
      if not done: self.blocked_on = None
      done += 1
      if frames[-1] is not frame: return progress, budget, done, True
    return progress, budget, done, True

  _by_header: tuple = (None, {})     # (HANDLERS it was built from, header & _TYPE_OPCODE -> handler)

  def _sequence(self, cache: list, by_header: dict, seqs: dict) -> tuple | None:
    """Decode the dwords of `cache` (a ring's read-ahead, from the next packet to the last written dword) as a run of
    whole packets of _SEQUENCE_OPCODES and keep it in `seqs` by its length: (itemgetter of the headers' positions
    and of the body dwords the specialised steps depend on, those dwords, packet count, steps), a step being (the
    handler bound to this engine or a specialised step, header position, the body's slice, opcode, packets of the run
    before this one); no-op packets have no step (run() only counts them).
    None when the run holds anything else (a filler, another packet type, an unknown opcode, a packet past the end,
    INDIRECT_BUFFER, PRED_EXEC): the general loop then decodes it and refuses what it refuses. Headers equal at the
    same positions are the same packets (each header gives the position of the next), so a run whose headers match a
    kept sequence is that sequence with other bodies. The last item reads a run of this length from the ring (native
    u32s, as the ring's view)."""
    n, pos = len(cache), 0
    positions, keys, steps = [], [], []
    while pos < n:
      header = cache[pos]
      handler = by_header.get(header & _TYPE_OPCODE)
      opcode = (header >> 8) & 0xFF
      if handler is None or opcode not in _SEQUENCE_OPCODES: return None
      nxt = pos + 2 + ((header >> 16) & 0x3FFF)
      if nxt > n: return None
      if handler is not _nop:
        # a step specialised by its packet's first (SET_SH_REG) or second (RELEASE_MEM) body dword, which is then
        # kept with the headers: a run matches only with the same dword there (_SPECIALISED)
        special = _SPECIALISED.get(handler)
        step = special(self, cache, pos, nxt) if special is not None else None
        if step is not None and step[0] is not None: keys.append(step[0])
        steps.append((handler.__get__(self) if step is None else step[1], pos, slice(pos + 1, nxt), opcode,
                      len(positions)))
      positions.append(pos)
      keys.append(pos)
      pos = nxt
    getter = itemgetter(*keys)
    seq = (getter, getter(cache), len(positions), tuple(steps), Struct(f"={n}I"))
    if len(seqs) >= SEQUENCE_CACHE_ENTRIES: seqs.clear()
    seqs[n] = seq
    return seq

  def _resume(self) -> bool:
    """The next time slice of the suspended dispatch; True when it ended (its packet is then complete). A fault of
    the dispatch ends it too (raised to the queue, as from the packet itself)."""
    running, frame, nxt = self.running
    try: ended = self.gpu.resume(running)
    except BaseException:
      self.running = None
      raise
    if not ended: return False
    self.running = None
    frame.pos = nxt
    self.blocked_on = None
    self.packets += 1
    return True

  def drop(self) -> None:
    """Abandon a suspended dispatch (its queue is destroyed or stopped)."""
    running, self.running = self.running, None
    if running is not None: running[0].drop()

  @classmethod
  def _header_handlers(cls) -> tuple:
    cls._by_header = (cls.HANDLERS, {(3 << 30) | (op << 8): fn for op, fn in cls.HANDLERS.items()})
    return cls._by_header

  # ---- packets
  def _nop(self, body, frame, pos, op): return True

  def _set_sh_reg(self, body, frame, pos, op):
    start = body[0] & 0xFFFF
    end = start + len(body) - 1
    if end > _SH_WINDOW:
      raise self._error(frame, pos, f"SET_SH_REG of {end - start} registers at offset {start:#x} leaves the SH window",
                        op)
    if end - start == 1: self.sh[start] = body[1]
    else: self.sh.update(zip(range(start, end), body[1:]))
    if _USER_LO <= start and end <= _USER_HI: self.user_data[start - _USER_LO:end - _USER_LO] = body[1:]
    else:
      if _LAUNCH_REGS.find(1, start, end) >= 0: self.launch_state = None
      if start < _USER_HI and _USER_LO < end:     # a run across the user data and other registers
        get = self.sh.get
        self.user_data = [get(r, 0) for r in range(_USER_LO, _USER_HI)]
    return True

  def _set_uconfig_reg(self, body, frame, pos, op):
    start = body[0] & 0xFFFF
    self.uconfig.update(zip(range(start, start + len(body) - 1), body[1:]))
    return True

  def _dispatch_direct(self, body, frame, pos, op):
    if len(body) < 4: raise self._error(frame, pos, f"DISPATCH_DIRECT needs 4 body dwords, has {len(body)}", op)
    try:
      self.launch_state, running = self.gpu.dispatch_direct(self.queue, self.sh, tuple(body[:3]), body[3],
                                                            self.launch_state, self.user_data)
    except QueueError as e:
      raise self._error(frame, pos, f"DISPATCH_DIRECT: {e}", op) from None
    if running is None: return True
    return self._suspended(running, frame, pos, len(body))

  def _suspended(self, running, frame: Frame, pos: int, body_len: int) -> bool:
    """DISPATCH_DIRECT's dispatch did not end within its time slice: the packet stays current (run() resumes the
    dispatch before anything else)."""
    self.running = (running, frame, pos + 1 + body_len)
    self.blocked_on = f"DISPATCH_DIRECT at ring offset {self._ring_offset(frame, pos):#x}: its dispatch is running " \
                      f"(suspended between time slices)"
    return False

  def _wait_reg_mem(self, body, frame, pos, op):
    if len(body) < 5: raise self._error(frame, pos, f"WAIT_REG_MEM needs 6 body dwords, has {len(body)}", op)
    info, lo, hi, ref, mask = body[:5]
    function, mem_space, operation = info & 7, (info >> 4) & 3, (info >> 6) & 3
    if function == 7: raise self._error(frame, pos, "WAIT_REG_MEM with reserved compare function 7", op)
    if mem_space == 1:
      if operation != 0: raise self._error(frame, pos, f"WAIT_REG_MEM operation {operation} on memory", op)
      addr = (lo & ~3) | (hi << 32)
      value = self.gpu.mem.read32(addr, f"{self.queue.name} WAIT_REG_MEM")
      what = f"memory {addr:#x}"
    elif mem_space == 0:
      if operation == 1:      # write the reference to the request register, then wait on the done register
        reg = hi & 0x3FFFF
        self.gpu.request_reg(lo & 0x3FFFF, reg, ref)
      elif operation == 0: reg = lo & 0x3FFFF
      else: raise self._error(frame, pos, f"WAIT_REG_MEM operation {operation} is reserved", op)
      value = self.gpu.read_reg(reg)
      what = f"register {reg:#x}"
    else: raise self._error(frame, pos, f"WAIT_REG_MEM memory space {mem_space} is not supported", op)
    if compare(function, value & mask, ref): return True
    self.blocked_on = f"WAIT_REG_MEM: {what} & {mask:#x} {R.WAIT_FUNCTIONS[function]} {ref:#x} (now {value & mask:#x})"
    return False

  def _indirect_buffer(self, body, frame, pos, op):
    if len(body) < 3: raise self._error(frame, pos, f"INDIRECT_BUFFER needs 3 body dwords, has {len(body)}", op)
    lo, hi, ctl = body[:3]
    if not ctl & R.INDIRECT_BUFFER_VALID: raise self._error(frame, pos, "INDIRECT_BUFFER without the VALID bit", op)
    size = ctl & R.IB_SIZE_MASK
    frames = self.frames
    depth = len(frames) - 1 if frames[0].ring else len(frames)     # IBs on the stack (a ring is only ever at its bottom)
    if depth >= MAX_IB_DEPTH: raise self._error(frame, pos, f"indirect buffers nested deeper than {MAX_IB_DEPTH}", op)
    frame.pos = pos + 1 + len(body)
    if size:
      addr = (lo & ~3) | ((hi & 0xFFFF) << 32)
      ib = Frame(addr, size, 0, size, False, self._ring_offset(frame, pos), f"IB{depth + 1}")
      if size <= IB_PLAN_MAX_DWORDS:
        # the whole IB is read at once (as prefetch() would), then its parse is looked up by content: a bound command
        # buffer run again unchanged is not decoded again, and any change to its dwords makes a new parse
        raw = self.gpu.mem.read_bytes(addr, 4 * size, self._ib_what)
        ib.cache, ib.plan = self._ib_plan(raw)
        ib.cache_end = size
      else:
        self.gpu.mem.check(addr, 4 * size, f"{self.queue.name} indirect buffer")
        ib.prefetch(self.gpu.mem, self.queue.name)
      frames.append(ib)
    return True

  def _ib_plan(self, raw: bytes) -> tuple[list, dict]:
    """(dwords, plan) of an IB's contents. The plan maps the start of each packet, from the first dword up to the
    first one run() would reject or skip (type-2 filler, unknown opcode, a packet past the end), to its opcode, its
    body (a tuple: handlers never write it) and the position after it. Positions not in the plan (after a PRED_EXEC
    skip, past a rejected packet) are decoded by run() as before, so errors and offsets stay the same."""
    hit = self._ib_plans.get(raw)
    if hit is not None: return hit
    words = array("I")
    words.frombytes(raw)
    words = words.tolist()
    plan, pos, size = {}, 0, len(words)
    while pos < size:
      header = words[pos]
      if header >> 30 != 3: break
      opcode, count = (header >> 8) & 0xFF, ((header >> 16) & 0x3FFF) + 1
      if opcode not in self.HANDLERS or pos + 1 + count > size: break
      plan[pos] = (opcode, tuple(words[pos + 1:pos + 1 + count]), pos + 1 + count)
      pos += 1 + count
    if len(self._ib_plans) >= IB_PLAN_CACHE_ENTRIES: self._ib_plans.clear()
    self._ib_plans[raw] = (words, plan)
    return words, plan

  def _release_mem(self, body, frame, pos, op):
    if len(body) < 6: raise self._error(frame, pos, f"RELEASE_MEM needs 7 body dwords, has {len(body)}", op)
    sel = body[1]
    data_sel = (sel >> 29) & 7
    addr = body[2] | (body[3] << 32)
    if data_sel == _DATA_64:
      # DeviceMemory.write64's kept-cell case inlined (the fence of every launch): the address was checked for these
      # mappings
      mem = self._mem
      cells = mem.cells64
      cell = cells[1].get(addr & ~7) if cells[0] == mem.ranges.generation else None
      if cell is not None: cell.value = body[4] | (body[5] << 32)
      else: mem.write64(addr & ~7, body[4] | (body[5] << 32), self._release_what)
    elif data_sel == _DATA_32: self.gpu.mem.write32(addr & ~3, body[4], self._release_what)
    elif data_sel == R.RELEASE_DATA_GPU_CLOCK or data_sel == R.RELEASE_DATA_SYS_CLOCK:
      self.gpu.mem.write64(addr & ~7, self.gpu.clock(), self._release_what)
    elif data_sel != R.RELEASE_DATA_NONE:
      raise self._error(frame, pos, f"RELEASE_MEM data_sel {data_sel} is not supported", op)
    int_sel = (sel >> 24) & 7
    if int_sel:
      if int_sel > 3: raise self._error(frame, pos, f"RELEASE_MEM int_sel {int_sel} is reserved", op)
      self.gpu.interrupt(self.queue, body[6] if len(body) > 6 else 0)
    return True

  # ---- steps of a kept run (_sequence), specialised by one body dword kept with the run's headers: every check that
  # dword decides is made once, when the run is decoded; the general handler stays for anything else
  def _sh_step(self, cache, pos: int, nxt: int):
    """(position of the register offset, step) for a SET_SH_REG inside the SH window that either writes user data
    only or none of it (_set_sh_reg's effect for that range), else None."""
    start = cache[pos + 1] & 0xFFFF
    end = start + nxt - pos - 2
    if end > _SH_WINDOW: return None                       # the general handler refuses it
    regs, sh = range(start, end), self.sh
    if _USER_LO <= start and end <= _USER_HI:
      lo, hi = start - _USER_LO, end - _USER_LO
      def user_step(body, frame, pos, op):
        values = body[1:]
        self.user_data[lo:hi] = values
        sh.update(zip(regs, values))
        return True
      return pos + 1, user_step
    if start < _USER_HI and _USER_LO < end: return None    # across the user data and other registers
    if _LAUNCH_REGS.find(1, start, end) >= 0:
      def launch_step(body, frame, pos, op):
        sh.update(zip(regs, body[1:]))
        self.launch_state = None
        return True
      return pos + 1, launch_step
    def sh_step(body, frame, pos, op):
      sh.update(zip(regs, body[1:]))
      return True
    return pos + 1, sh_step

  def _fence_step(self, cache, pos: int, nxt: int):
    """(position of the data/interrupt selector, step) for a RELEASE_MEM of a 64-bit value without an interrupt
    (_release_mem's effect, the fence of every launch), else None."""
    if nxt - pos - 1 < 6: return None                      # the general handler refuses it
    sel = cache[pos + 2]
    if (sel >> 29) & 7 != _DATA_64 or (sel >> 24) & 7: return None
    mem, what = self._mem, self._release_what
    def fence_step(body, frame, pos, op):
      addr = (body[2] | (body[3] << 32)) & ~7
      cells = mem.cells64                 # DeviceMemory.write64's kept-cell case inlined, as in _release_mem
      cell = cells[1].get(addr) if cells[0] == mem.ranges.generation else None
      if cell is not None: cell.value = body[4] | (body[5] << 32)
      else: mem.write64(addr, body[4] | (body[5] << 32), what)
      return True
    return pos + 2, fence_step

  def _dispatch_step(self, cache, pos: int, nxt: int):
    """(None: no dword kept, step) for a DISPATCH_DIRECT of at least 4 body dwords (_dispatch_direct's effect, its
    length checked once), else None. The GPU's dispatch_direct is looked up per call (a stand-in set later is used)."""
    if nxt - pos - 1 < 4: return None                      # the general handler refuses it
    gpu, queue, sh = self.gpu, self.queue, self.sh
    def dispatch_step(body, frame, pos, op):
      try: self.launch_state, running = gpu.dispatch_direct(queue, sh, tuple(body[:3]), body[3], self.launch_state,
                                                            self.user_data)
      except QueueError as e:
        raise self._error(frame, pos, f"DISPATCH_DIRECT: {e}", op) from None
      return running is None or self._suspended(running, frame, pos, len(body))
    return None, dispatch_step

  def _write_data(self, body, frame, pos, op):
    if len(body) < 3: raise self._error(frame, pos, f"WRITE_DATA needs at least 3 body dwords, has {len(body)}", op)
    control, lo, hi = body[:3]
    data = body[3:]
    dst_sel = (control >> 8) & 0xF
    one_addr = bool(control & R.WRITE_DATA_ONE_ADDR)
    if dst_sel == R.WRITE_DATA_DST_REG:
      for i, v in enumerate(data): self.gpu.write_reg((lo & 0x3FFFF) + (0 if one_addr else i), v)
    elif dst_sel in (1, 2, 5):
      addr = (lo & ~3) | (hi << 32)
      for i, v in enumerate(data): self.gpu.mem.write32(addr + (0 if one_addr else 4 * i), v, f"{self.queue.name} WRITE_DATA")
    else: raise self._error(frame, pos, f"WRITE_DATA dst_sel {dst_sel} is not supported", op)
    return True

  def _copy_data(self, body, frame, pos, op):
    if len(body) < 5: raise self._error(frame, pos, f"COPY_DATA needs 5 body dwords, has {len(body)}", op)
    control, src_lo, src_hi, dst_lo, dst_hi = body[:5]
    src_sel, dst_sel, wide = control & 0xF, (control >> 8) & 0xF, bool(control & R.COPY_DATA_COUNT_SEL)
    what = f"{self.queue.name} COPY_DATA"
    if src_sel == R.COPY_SEL_REG:
      value = self.gpu.read_reg(src_lo & 0x3FFFF) | ((self.gpu.read_reg((src_lo & 0x3FFFF) + 1) << 32) if wide else 0)
    elif src_sel in (R.COPY_SEL_MEM, R.COPY_SEL_TC_L2):
      src = src_lo | (src_hi << 32)
      value = self.gpu.mem.read64(src & ~7, what) if wide else self.gpu.mem.read32(src & ~3, what)
    elif src_sel == R.COPY_SEL_IMM: value = src_lo | ((src_hi << 32) if wide else 0)
    elif src_sel == R.COPY_SEL_GPU_CLOCK: value = self.gpu.clock() if wide else self.gpu.clock() & 0xFFFFFFFF
    else: raise self._error(frame, pos, f"COPY_DATA src_sel {src_sel} is not supported", op)
    if dst_sel == R.COPY_SEL_REG:
      self.gpu.write_reg(dst_lo & 0x3FFFF, value & 0xFFFFFFFF)
      if wide: self.gpu.write_reg((dst_lo & 0x3FFFF) + 1, value >> 32)
    elif dst_sel in (1, 2, 5):
      dst = dst_lo | (dst_hi << 32)
      if wide: self.gpu.mem.write64(dst & ~7, value, what)
      else: self.gpu.mem.write32(dst & ~3, value, what)
    else: raise self._error(frame, pos, f"COPY_DATA dst_sel {dst_sel} is not supported", op)
    return True

  def _pred_exec(self, body, frame, pos, op):
    """PRED_EXEC [xcc_mask << 24 | ndw]: the next ndw dwords run only on the XCCs in the mask (this GPU has XCC 0)."""
    ndw = body[0] & 0x3FFF
    frame.pos = pos + 1 + len(body)
    if not (body[0] >> 24) & 1: frame.pos += ndw
    return True

  HANDLERS = {
    R.PM4_NOP: _nop, R.PM4_SET_SH_REG: _set_sh_reg, R.PM4_SET_UCONFIG_REG: _set_uconfig_reg,
    R.PM4_DISPATCH_DIRECT: _dispatch_direct, R.PM4_WAIT_REG_MEM: _wait_reg_mem,
    R.PM4_INDIRECT_BUFFER: _indirect_buffer, R.PM4_RELEASE_MEM: _release_mem, R.PM4_EVENT_WRITE: _nop,
    R.PM4_ACQUIRE_MEM: _nop, R.PM4_WRITE_DATA: _write_data, R.PM4_COPY_DATA: _copy_data, R.PM4_PRED_EXEC: _pred_exec,
  }


_nop = PM4Engine._nop     # the handler the packet loop skips calling (ACQUIRE_MEM, EVENT_WRITE, NOP)


# the handlers whose steps in a kept run are specialised (PM4Engine._sequence), and how; a handler replaced in HANDLERS
# (a test's stand-in) is not specialised
_SPECIALISED = {PM4Engine._set_sh_reg: PM4Engine._sh_step, PM4Engine._release_mem: PM4Engine._fence_step,
                PM4Engine._dispatch_direct: PM4Engine._dispatch_step}
