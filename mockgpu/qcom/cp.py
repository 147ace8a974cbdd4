"""The mock Adreno's command processor: runs a submission's indirect buffers packet by packet.

Type-4 packets write the register file; type-7 packets are interpreted by opcode (names and fields from the
adreno_pm4 rnndb module): CP_NOP, CP_SET_MARKER, CP_WAIT_FOR_IDLE, CP_WAIT_MEM_WRITES (the model finishes every write
at once), CP_MEM_WRITE, CP_EVENT_WRITE (a *_TS event writes its value; with the TIMESTAMP bit, the GPU's clock), CP_WAIT_REG_MEM (WRITE_GE and the other
functions, polling memory: the CP stops there until the condition holds), CP_REG_TO_MEM (CP_ALWAYS_ON_COUNTER counts
a 19.2 MHz clock), CP_LOAD_STATE6{,_FRAG,_GEOM} (constants, shader, IBO descriptors of the compute stage, direct or
indirect), CP_INDIRECT_BUFFER, CP_EXEC_CS (a dispatch on the ir3 emulator, ir3.py, with the SP/HLSQ compute
registers). A header with bad parity, an unknown opcode or memory outside every object is a GPU fault."""
from __future__ import annotations

import ctypes
import time

import numpy as np

from ...errors import GPUFault

A6XX_ALWAYS_ON = 0x980


def odd_parity(v: int) -> int:
  v ^= v >> 16
  v ^= v >> 8
  v ^= v >> 4
  return (0x9669 >> (v & 0xF)) & 1


class CommandProcessor:
  def __init__(self, model, chip_id: int):
    from ...autogen.qcom import a6xx, adreno_pm4
    self.model, self.chip_id, self.a6xx, self.pm4 = model, chip_id, a6xx, adreno_pm4
    self.ops = adreno_pm4.ENUMS["adreno_pm4_type3_packets"]
    self.regs: dict[int, int] = {}
    self.consts = np.zeros(4 * 1024, np.uint32)       # the compute stage's constant file (vec4s)
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
    self.programs: dict = {}                          # compiled shaders (ir3.Dispatch), for this constant file
    self.dispatches = 0
    self.instructions = 0

  def reset(self) -> None:
    self.pos = None

  # ---- memory
  def _u32(self, va: int, what: str) -> ctypes.c_uint32:
    self.model.check(va, 4, what)
    return ctypes.c_uint32.from_address(va)

  def words(self, va: int, n: int, what: str) -> np.ndarray:
    self.model.check(va, 4 * n, what)
    return np.ctypeslib.as_array((ctypes.c_uint32 * n).from_address(va)).copy()

  # ---- running a submission
  def run(self, ctx, ibs) -> bool:
    """Run (or resume) a submission; False when the CP waits on memory."""
    ib, pos = self.pos or (0, 0)
    self.moved = False
    while ib < len(ibs):
      va, size = ibs[ib]
      stream = self.words(va, size // 4, "indirect buffer")
      while pos < len(stream):
        n = self.packet(stream, pos, va)
        if n is None:
          self.pos = (ib, pos)
          return False
        pos += n
        self.moved = True
      ib, pos = ib + 1, 0
    self.pos = None
    return True

  def run_stream(self, stream: np.ndarray, va: int) -> None:
    pos = 0
    while pos < len(stream):
      n = self.packet(stream, pos, va)
      if n is None: raise GPUFault("CP_WAIT_REG_MEM inside an indirect buffer never satisfied", address=va, kind="hang")
      pos += n

  def packet(self, stream, pos: int, base: int):
    """Run the packet at stream[pos]; returns its length in dwords, None when it must wait."""
    h = int(stream[pos])
    where = base + 4 * pos
    if h & 0xF0000000 == 0x40000000:
      n, reg = h & 0x7F, (h >> 8) & 0x3FFFF
      if (h >> 7) & 1 != odd_parity(n) or (h >> 27) & 1 != odd_parity(reg):
        raise GPUFault(f"CP: type-4 header {h:#010x} with bad parity", address=where, kind="CP illegal instruction")
      self._body(stream, pos, n, where)
      for i in range(n): self.regs[reg + i] = int(stream[pos + 1 + i])
      return 1 + n
    if h & 0xF0000000 == 0x70000000:
      n, opc = h & 0x3FFF, (h >> 16) & 0x7F
      if (h >> 15) & 1 != odd_parity(n) or (h >> 23) & 1 != odd_parity(opc) or h & 0x0F000000:
        raise GPUFault(f"CP: type-7 header {h:#010x} with bad parity", address=where, kind="CP illegal instruction")
      body = self._body(stream, pos, n, where)
      handler = self.handlers.get(opc)
      if handler is None: raise GPUFault(f"CP: opcode {opc:#x} is not modelled", address=where, kind="CP opcode error")
      if n < self.min_body.get(opc, 0):
        raise GPUFault(f"CP: {handler.__name__[1:]} with a body of {n} dwords (it has at least {self.min_body[opc]})",
                       address=where, kind="CP illegal instruction")
      return None if handler(body, where) is False else 1 + n
    raise GPUFault(f"CP: {h:#010x} is not a type-4 or type-7 header", address=where, kind="CP illegal instruction")

  @staticmethod
  def _body(stream, pos, n, where):
    if pos + 1 + n > len(stream):
      raise GPUFault(f"CP: a packet of {n} dwords runs past the end of its buffer", address=where, kind="CP illegal instruction")
    return [int(w) for w in stream[pos + 1:pos + 1 + n]]

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
      self._u32(addr, f"CP_EVENT_WRITE {name}").value = now & 0xFFFFFFFF
      self._u32(addr + 4, f"CP_EVENT_WRITE {name}").value = now >> 32
    else: self._u32(addr, f"CP_EVENT_WRITE {name}").value = b[3]

  @staticmethod
  def always_on() -> int: return time.monotonic_ns() * 192 // 10000          # CP_ALWAYS_ON_COUNTER: 19.2 MHz

  def _CP_WAIT_REG_MEM(self, b, where):
    p = self.pm4
    func = b[0] & p.CP_WAIT_REG_MEM_0_FUNCTION__MASK
    if not b[0] & p.CP_WAIT_REG_MEM_0_POLL_MEMORY:
      raise GPUFault("CP_WAIT_REG_MEM on a register is not modelled", address=where, kind="CP opcode error")
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
    for i, v in enumerate(vals[:max(cnt, 1)]): self._u32(addr + 4 * i, "CP_REG_TO_MEM").value = v

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

  def _CP_INDIRECT_BUFFER(self, b, where):
    addr, size = b[0] | b[1] << 32, b[2] & 0xFFFFF
    self.run_stream(self.words(addr, size, "CP_INDIRECT_BUFFER"), addr)

  def _CP_EXEC_CS(self, b, where):
    from .ir3 import Dispatch
    a, r = self.a6xx, self.regs
    groups = (b[1], b[2], b[3])
    nd = r.get(a.REG_A6XX_HLSQ_CS_NDRANGE_0, 0)
    local = tuple(((nd & m) >> s) + 1 for m, s in (
      (a.A6XX_HLSQ_CS_NDRANGE_0_LOCALSIZEX__MASK, a.A6XX_HLSQ_CS_NDRANGE_0_LOCALSIZEX__SHIFT),
      (a.A6XX_HLSQ_CS_NDRANGE_0_LOCALSIZEY__MASK, a.A6XX_HLSQ_CS_NDRANGE_0_LOCALSIZEY__SHIFT),
      (a.A6XX_HLSQ_CS_NDRANGE_0_LOCALSIZEZ__MASK, a.A6XX_HLSQ_CS_NDRANGE_0_LOCALSIZEZ__SHIFT)))
    cntl0 = r.get(a.REG_A6XX_HLSQ_CS_CNTL_0, 0xFCFCFCFC)
    ctrl = r.get(a.REG_A6XX_SP_CS_CTRL_REG0, 0)
    code_va = r.get(a.REG_A6XX_SP_CS_OBJ_START, 0) | r.get(a.REG_A6XX_SP_CS_OBJ_START + 1, 0) << 32
    instrlen = r.get(a.REG_A6XX_SP_CS_INSTRLEN, 0)
    if not code_va or not instrlen: raise GPUFault("CP_EXEC_CS without a shader (SP_CS_OBJ_START/INSTRLEN)", address=where, kind="CP illegal instruction")
    if not ctrl & a.A6XX_SP_CS_CTRL_REG0_MERGEDREGS:
      raise GPUFault("CP_EXEC_CS: separate half registers (SP_CS_CTRL_REG0 without MERGEDREGS) are not modelled",
                     address=where, kind="CP illegal instruction")
    code = self.words(code_va, instrlen * 32, "the shader (SP_CS_OBJ_START)")
    d = Dispatch(self.model, self.chip_id, code, code_va, groups, local, consts=self.consts, ibos=self.ibos,
                 wgid_reg=cntl0 & 0xFF, localid_reg=cntl0 >> 24,
                 wave=128 if ctrl & a.A6XX_SP_CS_CTRL_REG0_THREADSIZE__MASK else 64, cache=self.programs,
                 deadline=time.monotonic() + self.model.hang_timeout_s)
    d.run()
    self.dispatches += 1
    self.instructions += d.executed
