"""The mock Adreno's command processor: runs a submission's indirect buffers packet by packet.

Type-4 packets write the register file; type-7 packets are interpreted by opcode (names and fields from the
adreno_pm4 rnndb module): CP_NOP, CP_SET_MARKER, CP_WAIT_FOR_IDLE, CP_WAIT_MEM_WRITES (the model finishes every write
at once), CP_MEM_WRITE, CP_EVENT_WRITE (a *_TS event writes its value; with the TIMESTAMP bit, the GPU's clock), CP_WAIT_REG_MEM (WRITE_GE and the other
functions, polling memory: the CP stops there until the condition holds), CP_REG_TO_MEM (CP_ALWAYS_ON_COUNTER counts
a 19.2 MHz clock), CP_LOAD_STATE6{,_FRAG,_GEOM} (constants, shader, IBO descriptors of the compute stage, direct or
indirect), CP_INDIRECT_BUFFER, CP_EXEC_CS (a dispatch on the ir3 emulator, ir3/, with the SP/HLSQ compute
registers). A header with bad parity, an unknown opcode or memory outside every object is a GPU fault."""
from __future__ import annotations

import ctypes
import time
from array import array

import numpy as np

from ...errors import GPUFault
from .plan import A6XX_ALWAYS_ON, Planned

# the registers _cs_state reads (a6xx.xml names, REG_A6XX_ prefix)
_CS_REGS = ("SP_MODE_CONTROL", "SP_FLOAT_CNTL", "HLSQ_CS_CNTL", "SP_CS_CONFIG", "SP_CS_IBO_COUNT", "SP_CS_CTRL_REG0",
            "HLSQ_CS_CNTL_0", "HLSQ_CS_CNTL_1", "HLSQ_CS_NDRANGE_0", "SP_CS_CTRL_REG1", "SP_CS_PVT_MEM_PARAM",
            "SP_CS_PVT_MEM_ADDR", "SP_CS_PVT_MEM_SIZE", "SP_CS_OBJ_START", "SP_CS_INSTRLEN")


_DISPATCH = []


def _dispatch_class():
  """ir3.Dispatch, imported on the first dispatch (the emulator is loaded only when a program runs)."""
  if not _DISPATCH:
    from .ir3 import Dispatch
    _DISPATCH.append(Dispatch)
  return _DISPATCH[0]


_CS_STATE = frozenset(("constants", "shader"))    # what HLSQ_INVALIDATE_CMD.CS_STATE invalidates
_NO_IBOS = np.zeros((0, 16), np.uint32)            # no IBO descriptors (read-only: a load makes a new array)
_NO_IBOS.flags.writeable = False


def odd_parity(v: int) -> int:
  v ^= v >> 16
  v ^= v >> 8
  v ^= v >> 4
  return (0x9669 >> (v & 0xF)) & 1


class CommandProcessor(Planned):
  def __init__(self, model, chip_id: int):
    from ...autogen.qcom import a6xx, adreno_pm4
    self.model, self.chip_id, self.a6xx, self.pm4 = model, chip_id, a6xx, adreno_pm4
    self.ops = adreno_pm4.ENUMS["adreno_pm4_type3_packets"]
    self.regs: dict[int, int] = {}
    self.consts = np.zeros(4 * 1024, np.uint32)       # the compute stage's constant file (vec4s), never replaced
    self._consts_va = self.consts.ctypes.data
    self.ibos = np.zeros((0, 16), np.uint32)
    self.shader = (0, 0)                              # (address, 128-byte units) of the last ST6_SHADER load
    self.pos = None                                   # (ib index, dword) where the current submission stopped
    self.moved = False
    self.handlers = {self.ops[n]: getattr(self, "_" + n) for n in (
      "CP_NOP", "CP_SET_MARKER", "CP_WAIT_FOR_IDLE", "CP_WAIT_MEM_WRITES", "CP_MEM_WRITE", "CP_EVENT_WRITE",
      "CP_WAIT_REG_MEM", "CP_REG_TO_MEM", "CP_LOAD_STATE6_FRAG", "CP_LOAD_STATE6", "CP_LOAD_STATE6_GEOM",
      "CP_EXEC_CS", "CP_INDIRECT_BUFFER")}
    # the fewest body dwords each modelled packet reads (adreno_pm4.xml's CP_* domains): a shorter packet is an
    # illegal one, as the CP would fetch past it
    self.min_body = {self.ops[n]: k for n, k in (
      ("CP_MEM_WRITE", 2), ("CP_EVENT_WRITE", 1), ("CP_WAIT_REG_MEM", 5), ("CP_REG_TO_MEM", 3),
      ("CP_LOAD_STATE6_FRAG", 3), ("CP_LOAD_STATE6", 3), ("CP_LOAD_STATE6_GEOM", 3), ("CP_EXEC_CS", 4),
      ("CP_INDIRECT_BUFFER", 3))}
    events = adreno_pm4.ENUMS["vgt_event_type"]
    self._event_names = {v: k for k, v in events.items()}
    self._ts_events = {v for k, v in events.items() if k.endswith("_TS") or k.endswith("_TS_EVENT")}
    # registers of the LPAC pipe a6xx gen4 has and the a630 (gen1) has not (freedreno_devices.py has_lpac)
    self.absent = {} if chip_id >> 16 != 0x0603 else {
      getattr(a6xx, "REG_A6XX_" + n): n for n in ("SP_CS_CNTL_0", "SP_CS_CNTL_1", "HLSQ_CS_CTRL_REG1")}
    self._used: set = set()                           # compute state a dispatch ran with, not invalidated since
    self._stale: set = set()                          # ... that a CP_LOAD_STATE6 then replaced
    self.programs: dict = {}                          # compiled shaders (ir3.Dispatch), for this constant file
    # headers seen before, checked once: header -> (type 4 or 7, body dwords, register or opcode, plain)
    self._headers: dict[int, tuple[int, int, int, bool]] = {}
    self._invalidate_reg = a6xx.REG_A6XX_HLSQ_INVALIDATE_CMD
    self._cs_state_bit, self._cs_ibo_bit = a6xx.A6XX_HLSQ_INVALIDATE_CMD_CS_STATE, a6xx.A6XX_HLSQ_INVALIDATE_CMD_CS_IBO
    # the compute state checked by _cs_state, by the values of the registers it reads (and the preloaded shader
    # size): a dispatch with the same values needs no new checks (the private memory's mapping is checked each time)
    self._cs_regs = tuple(getattr(a6xx, "REG_A6XX_" + n) for n in _CS_REGS) + (a6xx.REG_A6XX_SP_CS_OBJ_START + 1,
                                                                            a6xx.REG_A6XX_SP_CS_PVT_MEM_ADDR + 1)
    self._cs_states: dict = {}
    self._dispatches: dict = {}                       # ir3.Dispatch kept by (state key, code, grid, timeout, sync mode)
    self._plans: dict = {}                            # streams run before: plan.Planned
    self.dispatches = 0
    self.instructions = 0

  def reset(self) -> None:
    """The GPU reset after a fault: the submission is dropped, the compute state forgotten."""
    self.pos = None
    self._used, self._stale = set(), set()
    self._dispatches.clear()

  # ---- memory
  def _u32(self, va: int, what: str) -> ctypes.c_uint32:
    self.model.check(va, 4, what)
    return ctypes.c_uint32.from_address(va)

  def words(self, va: int, n: int, what: str) -> np.ndarray:
    self.model.check(va, 4 * n, what)
    return np.frombuffer((ctypes.c_uint32 * n).from_address(va), np.uint32).copy()

  def stream(self, va: int, n: int, what: str) -> list[int]:
    """n dwords at va as a list of ints (a packet stream: one copy out of memory, no per-word conversion)."""
    self.model.check(va, 4 * n, what)
    out = array("I")
    out.frombytes(ctypes.string_at(va, 4 * n))
    return out.tolist()

  # ---- running a submission
  def run(self, ctx, ibs) -> bool:
    """Run (or resume) a submission; False when the CP waits on memory."""
    ib, pos = self.pos or (0, 0)
    self.moved = False
    while ib < len(ibs):
      va, size = ibs[ib]
      stopped = self.packets(self.stream(va, size // 4, "indirect buffer"), pos, va)
      if stopped is not None:
        self.pos = (ib, stopped)
        return False
      ib, pos = ib + 1, 0
    self.pos = None
    return True

  def run_stream(self, stream: list, va: int) -> None:
    if self.packets(stream, 0, va) is not None:
      raise GPUFault("CP_WAIT_REG_MEM inside an indirect buffer never satisfied", address=va, kind="hang")

  def packets(self, stream: list, pos: int, base: int) -> int | None:
    """Run the packets of stream (dwords at device address base) from stream[pos] to its end; the position of a
    packet that must wait (the CP stops there), else None. Sets `moved` once a packet ran. A stream run from its
    start whose packet headers sit where those of a stream run before did (the same length, the same header at each
    packet's position: the walk from dword 0 then visits the same packets) runs that stream's plan (plan.py)."""
    if pos == 0 and stream:
      plan = self._plan_of(stream)
      if plan is not None: return self._run_plan(plan, stream, base)
      walk: list[int] = []
      stopped = self._walk(stream, 0, base, walk)
      if stopped is None: self._keep_plan(stream, walk, base)
      return stopped
    return self._walk(stream, pos, base, None)

  def _walk(self, stream: list, pos: int, base: int, walk: list | None) -> int | None:
    """packets() packet by packet; `walk` (when given) gets each packet's position."""
    end, headers, regs, handlers = len(stream), self._headers, self.regs, self.handlers
    while pos < end:
      h = stream[pos]
      kind, n, what, plain = headers.get(h) or self._header(h, base + 4 * pos)
      nxt = pos + 1 + n
      if nxt > end:
        raise GPUFault(f"CP: a packet of {n} dwords runs past the end of its buffer", address=base + 4 * pos,
                       kind="CP illegal instruction")
      if walk is not None: walk.append(pos)
      if kind == 4:
        if not plain: self._write_regs(stream, pos, n, what, base + 4 * pos)
        elif n == 1: regs[what] = stream[pos + 1]
        else: regs.update(zip(range(what, what + n), stream[pos + 1:nxt]))
      elif not plain and handlers[what](stream[pos + 1:nxt], base + 4 * pos) is False: return pos
      self.moved = True
      pos = nxt
    return None

  def _write_regs(self, stream: list, pos: int, n: int, reg: int, where: int) -> None:
    """A type-4 packet's n registers from reg on; one the GPU does not have is a fault naming it."""
    for i in range(n):
      if reg + i in self.absent:
        raise GPUFault(f"CP: {self.absent[reg + i]} ({reg + i:#x}) does not exist on this GPU (a6xx gen1, no LPAC: "
                       f"Mesa freedreno_devices.py; computerator writes it only when has_lpac)", address=where,
                       kind="CP illegal instruction")
      self.regs[reg + i] = v = stream[pos + 1 + i]
      if reg + i == self._invalidate_reg: self._invalidate(v)

  def _header(self, h: int, where: int) -> tuple[int, int, int, bool]:
    """(4 or 7, body dwords, register or opcode, plain: a type 4's registers need no check, a type 7 does nothing
    in this model: CP_NOP and its aliases) of a packet header, checked (parity, a modelled opcode, the body
    the opcode needs) and kept: the next packet with this header is not checked again."""
    if h & 0xF0000000 == 0x40000000:
      n, reg = h & 0x7F, (h >> 8) & 0x3FFFF
      if (h >> 7) & 1 != odd_parity(n) or (h >> 27) & 1 != odd_parity(reg):
        raise GPUFault(f"CP: type-4 header {h:#010x} with bad parity", address=where, kind="CP illegal instruction")
      # "plain": no register the GPU lacks and not HLSQ_INVALIDATE_CMD among them (written as a block, unchecked)
      plain = not any(reg + i in self.absent or reg + i == self._invalidate_reg for i in range(n))
      known = (4, n, reg, plain)
    elif h & 0xF0000000 == 0x70000000:
      n, opc = h & 0x3FFF, (h >> 16) & 0x7F
      if (h >> 15) & 1 != odd_parity(n) or (h >> 23) & 1 != odd_parity(opc) or h & 0x0F000000:
        raise GPUFault(f"CP: type-7 header {h:#010x} with bad parity", address=where, kind="CP illegal instruction")
      handler = self.handlers.get(opc)
      if handler is None: raise GPUFault(f"CP: opcode {opc:#x} is not modelled", address=where, kind="CP opcode error")
      if n < self.min_body.get(opc, 0):
        raise GPUFault(f"CP: {handler.__name__[1:]} with a body of {n} dwords (it has at least {self.min_body[opc]})",
                       address=where, kind="CP illegal instruction")
      # "plain": a packet that does nothing in this model (CP_NOP and its aliases): its handler is not called
      known = (7, n, opc, getattr(handler, "__func__", None) is CommandProcessor._CP_NOP)
    else: raise GPUFault(f"CP: {h:#010x} is not a type-4 or type-7 header", address=where, kind="CP illegal instruction")
    if len(self._headers) >= 4096: self._headers.clear()
    self._headers[h] = known
    return known

  # ---- packets
  def _CP_NOP(self, b, where): pass
  _CP_SET_MARKER = _CP_WAIT_FOR_IDLE = _CP_WAIT_MEM_WRITES = _CP_NOP

  def _CP_MEM_WRITE(self, b, where):
    addr = b[0] | b[1] << 32
    for i, v in enumerate(b[2:]): self._u32(addr + 4 * i, "CP_MEM_WRITE").value = v

  def _CP_EVENT_WRITE(self, b, where):
    """A timestamp event (a vgt_event_type named *_TS: CACHE_FLUSH_TS, RB_DONE_TS, ...) writes the packet's value
    (dword 3) to the address in dwords 1-2 once the work before it is done; with TIMESTAMP (bit 30) it writes the
    GPU's 64-bit always-on counter instead of the value (adreno_pm4.xml, CP_EVENT_WRITE: "when set, write back
    timestamp instead of value from packet"). Other events carry no address."""
    p = self.pm4
    event = b[0] & p.CP_EVENT_WRITE_0_EVENT__MASK
    name = self._event_names.get(event, f"event {event:#x}")
    if event not in self._ts_events:
      if len(b) > 1: raise GPUFault(f"CP_EVENT_WRITE {name} with a body of {len(b)} dwords: only a timestamp event "
                                    f"carries an address", address=where, kind="CP illegal instruction")
      return
    if len(b) < 4: raise GPUFault(f"CP_EVENT_WRITE {name} with a body of {len(b)} dwords (a timestamp event has 4)",
                                  address=where, kind="CP illegal instruction")
    addr = b[1] | b[2] << 32
    if b[0] & p.CP_EVENT_WRITE_0_TIMESTAMP:
      now = self.always_on()
      self._store(addr, [now & 0xFFFFFFFF, now >> 32], f"CP_EVENT_WRITE {name}")
    else: self._u32(addr, f"CP_EVENT_WRITE {name}").value = b[3]

  @staticmethod
  def always_on() -> int: return time.monotonic_ns() * 192 // 10000          # CP_ALWAYS_ON_COUNTER: 19.2 MHz

  def _CP_WAIT_REG_MEM(self, b, where):
    p = self.pm4
    func = b[0] & p.CP_WAIT_REG_MEM_0_FUNCTION__MASK
    poll = (b[0] & p.CP_WAIT_REG_MEM_0_POLL__MASK) >> p.CP_WAIT_REG_MEM_0_POLL__SHIFT    # poll_memory_type
    if poll != p.POLL_MEMORY:
      raise GPUFault(f"CP_WAIT_REG_MEM POLL {poll} (not POLL_MEMORY) is not modelled", address=where, kind="CP opcode error")
    v = self._u32(b[1] | b[2] << 32, "CP_WAIT_REG_MEM").value & b[4]
    ref = b[3]
    ok = {0: True, 1: v < ref, 2: v <= ref, 3: v == ref, 4: v != ref, 5: v >= ref, 6: v > ref}.get(func)
    if ok is None: raise GPUFault(f"CP_WAIT_REG_MEM function {func}", address=where, kind="CP opcode error")
    return None if ok else False

  def _CP_REG_TO_MEM(self, b, where):
    p = self.pm4
    reg = b[0] & p.CP_REG_TO_MEM_0_REG__MASK
    cnt = (b[0] & p.CP_REG_TO_MEM_0_CNT__MASK) >> p.CP_REG_TO_MEM_0_CNT__SHIFT
    addr = b[1] | b[2] << 32
    if reg == A6XX_ALWAYS_ON:
      now = self.always_on()
      vals = [now & 0xFFFFFFFF, now >> 32]
    else: vals = [self.regs.get(reg + i, 0) for i in range(max(cnt, 1))]
    self._store(addr, vals[:max(cnt, 1)], "CP_REG_TO_MEM")

  def _store(self, va: int, vals: list, what: str) -> None:
    """dwords written from va on: one check when one object holds them all, else one per dword (as _u32)."""
    if self.model.find(va, 4 * len(vals)) is None:
      for i, v in enumerate(vals): self._u32(va + 4 * i, what).value = v
    else: (ctypes.c_uint32 * len(vals)).from_address(va)[:] = vals

  def _CP_LOAD_STATE6_FRAG(self, b, where):
    p = self.pm4
    w0 = b[0]
    dst = w0 & p.CP_LOAD_STATE6_0_DST_OFF__MASK
    stype = (w0 & p.CP_LOAD_STATE6_0_STATE_TYPE__MASK) >> p.CP_LOAD_STATE6_0_STATE_TYPE__SHIFT
    src = (w0 & p.CP_LOAD_STATE6_0_STATE_SRC__MASK) >> p.CP_LOAD_STATE6_0_STATE_SRC__SHIFT
    block = (w0 & p.CP_LOAD_STATE6_0_STATE_BLOCK__MASK) >> p.CP_LOAD_STATE6_0_STATE_BLOCK__SHIFT
    units = (w0 & p.CP_LOAD_STATE6_0_NUM_UNIT__MASK) >> p.CP_LOAD_STATE6_0_NUM_UNIT__SHIFT
    addr = b[1] | b[2] << 32
    if block != p.SB6_CS_SHADER: return                # only the compute stage is modelled
    kind = {p.ST6_SHADER: "shader", p.ST6_CONSTANTS: "constants", p.ST6_IBO: "IBOs"}.get(stype)
    if kind in self._used: self._stale.add(kind)
    if stype == p.ST6_SHADER:
      self.shader = (addr, units)
      return
    per = {p.ST6_CONSTANTS: 4, p.ST6_IBO: 16}.get(stype)
    if per is None: raise GPUFault(f"CP_LOAD_STATE6 state type {stype} is not modelled", address=where, kind="CP opcode error")
    n = units * per
    if src == p.SS6_DIRECT: data = np.array(b[3:3 + n], np.uint32)
    elif src == p.SS6_INDIRECT: data = self.words(addr, n, "CP_LOAD_STATE6")
    else: raise GPUFault(f"CP_LOAD_STATE6 source {src} is not modelled", address=where, kind="CP opcode error")
    if len(data) != n: raise GPUFault(f"CP_LOAD_STATE6: {n} dwords of state, {len(data)} given", address=where, kind="CP illegal instruction")
    if stype == p.ST6_CONSTANTS:
      if 4 * dst + n > len(self.consts): raise GPUFault("CP_LOAD_STATE6: constants past the constant file", address=where, kind="CP illegal instruction")
      self.consts[4 * dst:4 * dst + n] = data
    else:
      ibos = np.zeros((max(dst + units, len(self.ibos)), 16), np.uint32)
      ibos[:len(self.ibos)] = self.ibos
      ibos[dst:dst + units] = data.reshape(units, 16)
      self.ibos = ibos
  _CP_LOAD_STATE6 = _CP_LOAD_STATE6_GEOM = _CP_LOAD_STATE6_FRAG

  def _invalidate(self, v: int) -> None:
    """HLSQ_INVALIDATE_CMD: CS_STATE forgets the compute stage's loaded constants and shader, CS_IBO its IBO
    descriptors (they must be loaded again before a dispatch uses them)."""
    if v & self._cs_state_bit:
      self.consts.fill(0)
      self.shader = (0, 0)
      self._stale -= _CS_STATE
      self._used -= _CS_STATE
    if v & self._cs_ibo_bit:
      self.ibos = _NO_IBOS
      self._stale.discard("IBOs")
      self._used.discard("IBOs")

  def _CP_INDIRECT_BUFFER(self, b, where):
    addr, size = b[0] | b[1] << 32, b[2] & 0xFFFFF
    self.run_stream(self.stream(addr, size, "CP_INDIRECT_BUFFER"), addr)

  def _CP_EXEC_CS(self, b, where):
    """A dispatch with the compute state as programmed: each register CP_EXEC_CS uses must have been written (the
    mock knows nothing the driver did not write) and hold a value the hardware accepts; see _cs_state."""
    Dispatch = _dispatch_class()
    # the same register values (and preloaded shader) as a dispatch checked before: the same state, unless stale
    # state is to be refused or private memory (whose mapping may have changed) is programmed
    key = (tuple(map(self.regs.get, self._cs_regs)), self.shader[1])
    st = self._cs_states.get(key)
    if st is None or self._stale or st["private"]:
      st = self._cs_state(where)
      if len(self._cs_states) >= 256: self._cs_states.clear()
      self._cs_states[key] = st
    # the shader as memory holds it now; a dispatch of the same code, grid and register values (and the same hang
    # timeout and sync mode) is kept and run again (ir3.Dispatch.again): decoded and set up once
    va, nbytes = st["code_va"], st["instrlen"] * 128
    self.model.check(va, nbytes, "the shader (SP_CS_OBJ_START, SP_CS_INSTRLEN)")
    code = ctypes.string_at(va, nbytes)
    dkey = (key, code, b[1], b[2], b[3], self.model.hang_timeout_s, self.model.sync_check)
    d = self._dispatches.get(dkey)
    if d is None:
      d = Dispatch(self.model, self.chip_id, np.frombuffer(code, np.uint32), va, (b[1], b[2], b[3]), st["local"],
                   consts=self.consts, ibos=self.ibos, wgid_reg=st["wgid"], localid_reg=st["localid"],
                   wave=st["wave"], cache=self.programs, hang_timeout_s=self.model.hang_timeout_s,
                   constlen=st["constlen"], nibo=st["nibo"], footprint=st["footprint"], shared_bytes=st["shared"],
                   private_bytes=st["private"], linear_id_reg=st["linear"], sync=self.model.sync_check,
                   demotion=st["demotion"])
      if len(self._dispatches) >= 64: self._dispatches.clear()
      self._dispatches[dkey] = d
    else: d.again(self.ibos)
    self._used = {"constants", "shader", "IBOs"}     # state a later load must invalidate before replacing
    d.run()
    self.dispatches += 1
    self.instructions += d.executed

  def _reg(self, name: str, where: int) -> int:
    """A register CP_EXEC_CS reads: never written is a fault naming it (its reset value is not documented)."""
    off = getattr(self.a6xx, "REG_A6XX_" + name)
    v = self.regs.get(off)
    if v is None: raise GPUFault(f"CP_EXEC_CS: {name} ({off:#x}) was never written", address=where,
                                 kind="CP illegal instruction")
    return v

  def _field(self, value: int, name: str) -> int:
    a = self.a6xx
    return (value & getattr(a, name + "__MASK")) >> getattr(a, name + "__SHIFT")

  def _cs_state(self, where: int) -> dict:
    """The registers of a6xx.xml that a compute dispatch uses (the list computerator's a6xx.c programs), checked:
    HLSQ_CS_CNTL (ENABLED, CONSTLEN), SP_CS_CONFIG (ENABLED, NIBO; SP_CS_IBO_COUNT must agree), SP_CS_CTRL_REG0
    (THREADSIZE, FULLREGFOOTPRINT against the work-group size as tinygrad's max_threads computes it, MERGEDREGS),
    HLSQ_CS_CNTL_0/1 (ids, THREADSIZE agreeing with SP_CS_CTRL_REG0's), SP_CS_CTRL_REG1 (SHARED_SIZE),
    SP_CS_PVT_MEM_* when private memory is programmed, SP_CS_OBJ_START and SP_CS_INSTRLEN (the shader preloaded
    by CP_LOAD_STATE6 must lie within it), HLSQ_CS_NDRANGE_0 (the work-group size)."""
    a, f = self.a6xx, self._field
    def bad(why): return GPUFault(f"CP_EXEC_CS: {why}", address=where, kind="CP illegal instruction")
    mode = self._reg("SP_MODE_CONTROL", where)
    if self._reg("SP_FLOAT_CNTL", where): raise bad(f"SP_FLOAT_CNTL {self.regs[a.REG_A6XX_SP_FLOAT_CNTL]:#x}: float modes other than 0 (computerator's) are not modelled")
    if self._stale: raise bad(f"CP_LOAD_STATE6 replaced the compute state ({', '.join(sorted(self._stale))}) of an earlier "
                              f"dispatch without HLSQ_INVALIDATE_CMD (CS_STATE, CS_IBO) first, as computerator and tinygrad "
                              f"write it: the SP may run with its cached copy")
    cntl = self._reg("HLSQ_CS_CNTL", where)
    if not cntl & a.A6XX_HLSQ_CS_CNTL_ENABLED: raise bad("HLSQ_CS_CNTL.ENABLED is clear")
    constlen = f(cntl, "A6XX_HLSQ_CS_CNTL_CONSTLEN") * 4           # the field drops 2 bits (a6xx.xml shr="2")
    config = self._reg("SP_CS_CONFIG", where)
    if not config & a.A6XX_SP_CS_CONFIG_ENABLED: raise bad("SP_CS_CONFIG.ENABLED is clear")
    nibo = f(config, "A6XX_SP_CS_CONFIG_NIBO")
    if nibo and self.regs.get(a.REG_A6XX_SP_CS_IBO_COUNT) != nibo:
      raise bad(f"SP_CS_CONFIG.NIBO is {nibo}, SP_CS_IBO_COUNT {self.regs.get(a.REG_A6XX_SP_CS_IBO_COUNT)}")
    ctrl = self._reg("SP_CS_CTRL_REG0", where)
    if not ctrl & a.A6XX_SP_CS_CTRL_REG0_MERGEDREGS:
      raise bad("separate half registers (SP_CS_CTRL_REG0 without MERGEDREGS) are not modelled")
    footprint = f(ctrl, "A6XX_SP_CS_CTRL_REG0_FULLREGFOOTPRINT")
    thread = f(ctrl, "A6XX_SP_CS_CTRL_REG0_THREADSIZE")
    cntl0 = self._reg("HLSQ_CS_CNTL_0", where)
    cntl1 = self._reg("HLSQ_CS_CNTL_1", where)
    if f(cntl1, "A6XX_HLSQ_CS_CNTL_1_THREADSIZE") != thread:
      raise bad(f"HLSQ_CS_CNTL_1.THREADSIZE ({f(cntl1, 'A6XX_HLSQ_CS_CNTL_1_THREADSIZE')}) differs from "
                f"SP_CS_CTRL_REG0.THREADSIZE ({thread})")
    nd = self._reg("HLSQ_CS_NDRANGE_0", where)
    local = tuple(f(nd, f"A6XX_HLSQ_CS_NDRANGE_0_LOCALSIZE{c}") + 1 for c in "XYZ")
    threads = local[0] * local[1] * local[2]
    # tinygrad 0.14 QCOMProgram.max_threads (hardware-proven on a630): min(1024, 384 * 32 // (regs * 128) * 128)
    most = min(1024, (384 * 32) // (max(1, footprint) * 128) * 128)
    if threads > most:
      raise bad(f"a work-group of {threads} fibers ({local}) needs more registers than the SP has: "
                f"SP_CS_CTRL_REG0.FULLREGFOOTPRINT {footprint} allows {most}")
    a9b1 = self._reg("SP_CS_CTRL_REG1", where)
    size = f(a9b1, "A6XX_SP_CS_CTRL_REG1_SHARED_SIZE")
    shared = 32 << 10 if size == 0 else (size + 1) << 10     # a6xx.xml: 0 is all 32k, else (SHARED_SIZE + 1) * 1k
    private = 0
    param = self.regs.get(a.REG_A6XX_SP_CS_PVT_MEM_PARAM)
    if param:
      per_fiber = f(param, "A6XX_SP_CS_PVT_MEM_PARAM_MEMSIZEPERITEM") << 9
      addr = self.regs.get(a.REG_A6XX_SP_CS_PVT_MEM_ADDR, 0) | self.regs.get(a.REG_A6XX_SP_CS_PVT_MEM_ADDR + 1, 0) << 32
      per_sp = f(self.regs.get(a.REG_A6XX_SP_CS_PVT_MEM_SIZE, 0), "A6XX_SP_CS_PVT_MEM_SIZE_TOTALPVTMEMSIZE") << 12
      # freedreno_devices.py (a630: 2 SP cores, 128 * 16 fibers per SP): every fiber slot of every SP has its bytes
      if per_sp < per_fiber * 128 * 16:
        raise bad(f"SP_CS_PVT_MEM_SIZE ({per_sp:#x} bytes per SP) is less than MEMSIZEPERITEM {per_fiber} x 2048 fibers")
      self.model.check(addr, per_sp * 2, "SP_CS_PVT_MEM_ADDR (the private memory of 2 SP cores)")
      private = per_fiber
    code_va = self._reg("SP_CS_OBJ_START", where) | self.regs.get(a.REG_A6XX_SP_CS_OBJ_START + 1, 0) << 32
    instrlen = self._reg("SP_CS_INSTRLEN", where)
    if not code_va or not instrlen: raise bad("no shader (SP_CS_OBJ_START/SP_CS_INSTRLEN are 0)")
    if self.shader[1] > instrlen:
      raise bad(f"CP_LOAD_STATE6 preloaded {self.shader[1]} units of shader, SP_CS_INSTRLEN is {instrlen}")
    wgid, localid = cntl0 & 0xFF, cntl0 >> 24
    if localid < 48 * 4 and (localid + 2) // 4 >= footprint:
      raise bad(f"HLSQ_CS_CNTL_0.LOCALIDREGID r{localid // 4}.{'xyzw'[localid % 4]} (3 components) is outside "
                f"SP_CS_CTRL_REG0.FULLREGFOOTPRINT ({footprint} registers)")
    return {"constlen": constlen, "nibo": nibo, "footprint": footprint, "wave": 128 if thread else 64,
            "local": local, "shared": shared, "private": private, "code_va": code_va, "instrlen": instrlen,
            "wgid": wgid, "localid": localid, "linear": f(cntl1, "A6XX_HLSQ_CS_CNTL_1_LINEARLOCALIDREGID"),
            "demotion": bool(mode & a.A6XX_SP_MODE_CONTROL_CONSTANT_DEMOTION_ENABLE)}
