"""A stream's plan: the mock command processor (cp.py) runs a stream packet by packet once and keeps what it did as
steps; a later stream with the same length and the same packet header at each packet's position visits the same
packets (the walk from dword 0 goes by the headers alone), so it runs by those steps without reading its headers
again. Each header's checks (parity, a modelled opcode, the least body, a register the GPU lacks) depend on the
header alone and were made when the stream first ran; a plan is kept only for a stream that ran to its end (a packet
that faulted or waited leaves none). Where a handler's course depends on its packet's first body dword (the event
of CP_EVENT_WRITE and its TIMESTAMP bit, CP_REG_TO_MEM of the always-on counter, CP_LOAD_STATE6's block, type and
source), the plan holds that course as a step and compares the dword too.

Steps (kind, a, b, position in the stream), in stream order:
  REGS        the plain registers a (written in stream order: a register written twice ends with the later value)
              from the dwords b(stream) (an itemgetter), or from stream[position] when b is None;
  STORE       CP_EVENT_WRITE of a *_TS event: the packet's value (dword 3) to the address in dwords 1-2; a: the name;
  CLOCK       the always-on counter's b dwords to the address in dwords 1-2 (CP_EVENT_WRITE with TIMESTAMP,
              CP_REG_TO_MEM of CP_ALWAYS_ON_COUNTER); a: the name;
  HANDLER     the packet's handler a with its body (up to b) and address, as the packet-by-packet run calls it;
  SHADER      CP_LOAD_STATE6 of the compute stage's shader: its place (a units);
  CONSTS      CP_LOAD_STATE6 of constants from memory: b dwords into the constant file from its byte a on;
  INVALIDATE  HLSQ_INVALIDATE_CMD, its value at stream[position] (after the registers before it in its packet);
  WRITE_REGS  a type-4 packet written register by register (a: its first register, b: the count)."""
from __future__ import annotations

import ctypes
from operator import itemgetter

REGS, STORE, CLOCK, HANDLER, SHADER, CONSTS, INVALIDATE, WRITE_REGS = range(8)
_U32, _U32S = ctypes.c_uint32, {1: ctypes.c_uint32 * 1, 2: ctypes.c_uint32 * 2}
A6XX_ALWAYS_ON = 0x980          # CP_ALWAYS_ON_COUNTER's register (a6xx.xml REG_A6XX_CP_ALWAYS_ON_COUNTER)
MOST_PLANS = 256                # kept in all (8 per length and first header)


class Plan:
  """A stream's packets as run once: heads(stream) == want when a stream has the same packet headers at the same
  positions (and the same first body dword where a step was decoded from it); steps as the module says."""
  __slots__ = ("heads", "want", "steps")

  def __init__(self, heads, want, steps):
    self.heads, self.want, self.steps = heads, want, steps


class Planned:
  """The command processor's plans (a mixin of cp.CommandProcessor: it reads the CP's registers, state and
  handlers). _plans: {(length, first header): [Plan]}."""

  def _plan_of(self, stream: list) -> Plan | None:
    """The plan of a stream with the same packet headers (and decoded dwords) as one run before, else None."""
    for plan in self._plans.get((len(stream), stream[0]), ()):
      if plan.heads(stream) == plan.want: return plan
    return None

  def _keep_plan(self, stream: list, walk: list[int], base: int) -> None:
    """The plan of a stream that ran to its end: its packets as steps, each header's checks already made (they
    depend on the header alone). Between two packets with a handler, the plain type-4 packets' registers are one
    dict update (in stream order: a register written twice ends with the later value); a packet that does nothing
    in this model (CP_NOP and its aliases) is no step; a handler gets its body and address as in _walk."""
    steps: list[tuple] = []
    keys: list[int] = []
    spots: list[int] = []

    def flush() -> None:
      if keys: steps.append((REGS, tuple(keys), itemgetter(*spots) if len(spots) > 1 else None, spots[0]))
      keys.clear()
      spots.clear()

    looked = list(walk)                            # the positions plan.heads reads: the headers, decoded dwords
    for pos in walk:
      h = stream[pos]
      kind, n, what, plain = self._headers.get(h) or self._header(h, base + 4 * pos)
      if kind == 4 and plain:
        keys.extend(range(what, what + n))
        spots.extend(range(pos + 1, pos + 1 + n))
      elif kind == 4 and not any(r in self.absent for r in range(what, what + n)):
        # HLSQ_INVALIDATE_CMD among them (no register the GPU lacks: that packet faulted when it ran): the registers
        # up to it, then what it invalidates, then the rest
        cut = self._invalidate_reg - what
        keys.extend(range(what, what + cut + 1))
        spots.extend(range(pos + 1, pos + 2 + cut))
        flush()
        steps.append((INVALIDATE, None, None, pos + 1 + cut))
        keys.extend(range(what + cut + 1, what + n))
        spots.extend(range(pos + 2 + cut, pos + 1 + n))
      elif kind == 4:
        flush()
        steps.append((WRITE_REGS, what, n, pos))
      elif not plain:
        step = self._decoded(what, stream[pos + 1], n, pos)
        if step is None: step = (HANDLER, self.handlers[what], pos + 1 + n, pos)
        else: looked.append(pos + 1)
        if step:
          flush()
          steps.append(step)
    flush()
    key = (len(stream), stream[0])
    kept = self._plans.setdefault(key, [])
    if len(kept) >= 8: kept.pop(0)
    if sum(map(len, self._plans.values())) >= MOST_PLANS:
      self._plans.clear()
      kept = self._plans[key] = []
    heads = itemgetter(*looked)                    # one packet: the header itself, else a tuple
    kept.append(Plan(heads, heads(stream), tuple(steps)))

  def _decoded(self, opc: int, w0: int, n: int, pos: int) -> tuple | None:
    """A plan's step for a type-7 packet whose handler's course its first body dword w0 decides (with the body's
    length, which the header gives): what the handler does for this w0, its checks on w0 already made when the
    packet ran (a packet that faulted is in no plan). () for a packet that then does nothing, None where the
    handler runs as it is (the plan then does not depend on w0)."""
    p, ops = self.pm4, self.ops
    if opc == ops["CP_EVENT_WRITE"]:
      event = w0 & p.CP_EVENT_WRITE_0_EVENT__MASK
      if event not in self._ts_events: return ()          # (a body past dword 0 faulted when the packet ran)
      what = f"CP_EVENT_WRITE {self._event_names.get(event, f'event {event:#x}')}"
      return (CLOCK, what, 2, pos) if w0 & p.CP_EVENT_WRITE_0_TIMESTAMP else (STORE, what, None, pos)
    if opc == ops["CP_REG_TO_MEM"]:
      if w0 & p.CP_REG_TO_MEM_0_REG__MASK != A6XX_ALWAYS_ON: return None
      cnt = (w0 & p.CP_REG_TO_MEM_0_CNT__MASK) >> p.CP_REG_TO_MEM_0_CNT__SHIFT
      return CLOCK, "CP_REG_TO_MEM", min(max(cnt, 1), 2), pos
    if opc in (ops["CP_LOAD_STATE6_FRAG"], ops["CP_LOAD_STATE6"], ops["CP_LOAD_STATE6_GEOM"]):
      block = (w0 & p.CP_LOAD_STATE6_0_STATE_BLOCK__MASK) >> p.CP_LOAD_STATE6_0_STATE_BLOCK__SHIFT
      if block != p.SB6_CS_SHADER: return ()
      stype = (w0 & p.CP_LOAD_STATE6_0_STATE_TYPE__MASK) >> p.CP_LOAD_STATE6_0_STATE_TYPE__SHIFT
      src = (w0 & p.CP_LOAD_STATE6_0_STATE_SRC__MASK) >> p.CP_LOAD_STATE6_0_STATE_SRC__SHIFT
      units = (w0 & p.CP_LOAD_STATE6_0_NUM_UNIT__MASK) >> p.CP_LOAD_STATE6_0_NUM_UNIT__SHIFT
      if stype == p.ST6_SHADER: return SHADER, units, None, pos
      if stype == p.ST6_CONSTANTS and src == p.SS6_INDIRECT:     # (past the constant file: faulted when it ran)
        return CONSTS, 16 * (w0 & p.CP_LOAD_STATE6_0_DST_OFF__MASK), 4 * units, pos
    return None

  def _run_plan(self, plan: "Plan", stream: list, base: int) -> int | None:
    """A stream's packets by its plan (_keep_plan): what _walk does, without reading the headers again. The decoded
    steps do what their handlers do for that first body dword (_decoded): STORE (CP_EVENT_WRITE of a *_TS event:
    the packet's value), CLOCK (the always-on counter's b dwords: CP_EVENT_WRITE with TIMESTAMP, CP_REG_TO_MEM of
    CP_ALWAYS_ON_COUNTER), SHADER and CONSTS (CP_LOAD_STATE6 of the compute stage: the shader's place, constants
    from memory), INVALIDATE (the HLSQ_INVALIDATE_CMD written at stream[pos])."""
    regs, pages, find = self.regs, self.model._pages, self.model.find
    for kind, a, b, pos in plan.steps:
      if kind == REGS:
        if b is None: regs[a[0]] = stream[pos]
        else: regs.update(zip(a, b(stream)))
      elif kind == STORE:
        va = stream[pos + 2] | stream[pos + 3] << 32
        hit = pages.get(va >> 12)          # the KGSL model's check(), its kept object tested here (no call)
        if hit is None or va < hit[0] or va + 4 > hit[1]: self.model.check(va, 4, a)
        _U32.from_address(va).value = stream[pos + 4]
      elif kind == CLOCK:
        now = self.always_on()
        va, vals = stream[pos + 2] | stream[pos + 3] << 32, [now & 0xFFFFFFFF, now >> 32][:b]
        hit = pages.get(va >> 12)
        if hit is not None and hit[0] <= va and va + 4 * b <= hit[1] or find(va, 4 * b) is not None:
          _U32S[b].from_address(va)[:] = vals
        else: self._store(va, vals, a)       # dword by dword: the first outside every object faults
      elif kind == HANDLER:
        if a(stream[pos + 1:b], base + 4 * pos) is False:
          if pos: self.moved = True              # the packets before it ran
          return pos
      elif kind == SHADER:
        if "shader" in self._used: self._stale.add("shader")
        self.shader = (stream[pos + 2] | stream[pos + 3] << 32, a)
      elif kind == CONSTS:
        if "constants" in self._used: self._stale.add("constants")
        va = stream[pos + 2] | stream[pos + 3] << 32
        self.model.check(va, 4 * b, "CP_LOAD_STATE6")
        ctypes.memmove(self._consts_va + a, va, 4 * b)     # (the constant file's array is never replaced)
      elif kind == INVALIDATE: self._invalidate(stream[pos])
      else: self._write_regs(stream, pos, b, a, base + 4 * pos)
    self.moved = True
    return None
