"""Signals: 16-byte slots in host-visible memory, a u64 value at +0 and a u64 timestamp at +8.

The device writes them (end-of-pipe releases, SDMA fences, timestamps); the host polls them. Every wait has a
timeout and raises hcq.Timeout naming the signal, the value awaited and the last value seen.

Two kinds, chosen once per device (SignalPool's `make`), never per access:
  - Signal: the slot is memory the CPU maps (host memory, a mapped BAR): reads and writes are loads and stores;
  - DeviceSignal: the slot is device memory the CPU cannot map (VRAM behind a USB bridge). Its words are a CPU
    shadow; a read of value/timestamp goes through the device (`read(va, size)`: one 8-byte read, e.g. a 2-DW MRd
    TLP), a write updates the shadow and goes through at once (`write(va, data)`), and a wait polls through the
    device with `poll_s` seconds between polls (0: back to back), bounded by the same timeout and error."""
from __future__ import annotations

from typing import Callable

from ...errors import Timeout

SIGNAL_SIZE = 16
VALUE_OFFSET, TIMESTAMP_OFFSET = 0, 8

# busy polls before the first sleep, then sleeps growing from MIN to MAX (seconds)
SPIN_POLLS = 200
MIN_SLEEP_S, MAX_SLEEP_S = 20e-6, 2e-3
FAULT_CHECK_S = 0.01     # how often a DeviceSignal's wait asks the vendor for device faults


class Signal:
  """A value + timestamp slot. `words` is a memoryview of two u64 over the slot; `va` its device address."""
  __slots__ = ("va", "name", "_words", "_pool", "ticks_per_us")

  def __init__(self, va: int, words: memoryview, name: str = "signal", pool: "SignalPool | None" = None,
               ticks_per_us: float = 1.0):
    if words.format != "Q" or len(words) != 2: raise ValueError(f"{name}: a signal is viewed as two u64 words")
    self.va, self.name, self._words, self._pool, self.ticks_per_us = va, name, words, pool, ticks_per_us

  @property
  def value(self) -> int: return self._words[0]
  @value.setter
  def value(self, v: int) -> None: self._words[0] = v

  @property
  def timestamp(self) -> int:
    """Raw device clock ticks written by a timestamp command."""
    return self._words[1]
  @timestamp.setter
  def timestamp(self, v: int) -> None: self._words[1] = v

  @property
  def timestamp_us(self) -> float: return self._words[1] / self.ticks_per_us

  def wait(self, value: int, timeout_s: float, clock: Callable[[], float], sleep: Callable[[float], None],
           idle: Callable[[float], None] | None = None) -> int:
    """Wait until value >= `value`. Busy-polls first, then backs off with sleeps; `idle(seconds)` (if given)
    replaces the sleep (the driver blocks in the kernel there and checks for device faults). The timeout restarts
    whenever the value moves (progress). Returns the value seen."""
    words = self._words
    seen = words[0]
    if seen >= value: return seen
    for _ in range(SPIN_POLLS):
      seen = words[0]
      if seen >= value: return seen
    rest = sleep if idle is None else idle
    start = clock()
    pause = MIN_SLEEP_S
    last = seen
    while True:
      seen = words[0]
      if seen >= value: return seen
      now = clock()
      if seen != last: start, last, pause = now, seen, MIN_SLEEP_S
      elif now - start > timeout_s:
        raise Timeout(f"{self.name} at {self.va:#x}", expected=value, last_seen=seen, timeout_s=timeout_s)
      rest(pause)
      pause = min(pause * 2, MAX_SLEEP_S)

  def free(self) -> None:
    if self._pool is not None: self._pool.release(self)

  def __repr__(self): return f"Signal({self.name}, va={self.va:#x})"


class DeviceSignal(Signal):
  """A signal in memory the CPU reaches only through the device (see the module docstring): `read(va, size) -> bytes`
  and `write(va, data)` are the device's accesses, `poll_s` the pause between polls of a wait, `sleep` the OS's."""
  __slots__ = ("_read", "_write", "poll_s", "_sleep", "polls", "torn")

  def __init__(self, va: int, words: memoryview, name: str = "signal", pool: "SignalPool | None" = None,
               ticks_per_us: float = 1.0, read=None, write=None, poll_s: float = 0.0, sleep=None, torn: bool = False):
    """torn: a read may see a value the device is halfway through writing (memory read byte by byte, as the bridge
    controller reads its XDATA windows): a value is taken once two reads in a row agree."""
    super().__init__(va, words, name, pool, ticks_per_us)
    self._read, self._write, self.poll_s, self._sleep, self.polls, self.torn = read, write, poll_s, sleep, 0, torn

  def _load(self, offset: int, width: int) -> int:
    v = int.from_bytes(self._read(self.va + offset, width), "little")
    return self._settle(v, offset, width) if self.torn else v

  def _settle(self, v: int, offset: int, width: int) -> int:
    """Read again until two reads in a row agree (v: the first one)."""
    while True:
      again = int.from_bytes(self._read(self.va + offset, width), "little")
      if again == v: return v
      v = again

  def _word(self, index: int) -> int:
    v = self._load(8 * index, 8)
    self._words[index] = v
    return v

  def _set(self, index: int, v: int) -> None:
    self._words[index] = v
    self._write(self.va + 8 * index, self._words[index:index + 1].cast("B"))

  @property
  def value(self) -> int: return self._word(0)
  @value.setter
  def value(self, v: int) -> None: self._set(0, v)

  @property
  def timestamp(self) -> int: return self._word(1)
  @timestamp.setter
  def timestamp(self, v: int) -> None: self._set(1, v)

  @property
  def timestamp_us(self) -> float: return self._word(1) / self.ticks_per_us

  def wait(self, value: int, timeout_s: float, clock: Callable[[], float], sleep: Callable[[float], None],
           idle: Callable[[float], None] | None = None) -> int:
    """Poll through the device until value >= `value`, poll_s between polls (no busy phase: each poll is a bus
    transaction, so the pause is what bounds the load on the bus); the timeout restarts while the value moves.
    `idle(0)` (the completion hook given no time to block: the vendor checks for device faults there, raising
    hcq.GPUFault) runs every FAULT_CHECK_S while the wait lasts."""
    read, pause = self._read, self.poll_s
    rest = self._sleep or sleep
    # a wait for a value below 2^32 on a signal last seen below 2^32 (the timeline: engines compare 32 bits; fences
    # that count up by one) polls the low word: one 32-bit read (request + completion) instead of a 2-DW one (request,
    # data, completion)
    width = 4 if value < 1 << 32 and self._words[0] < 1 << 32 else 8
    seen = last = int.from_bytes(read(self.va, width), "little")
    self.polls += 1
    if seen >= value and self.torn: seen = self._settle(seen, 0, width)     # done: unless the read was torn
    start = checked = clock()
    while seen < value:
      now = clock()
      if idle is not None and now - checked >= FAULT_CHECK_S:
        idle(0)
        checked = now
      if seen != last: start, last = now, seen
      elif now - start >= timeout_s:
        self._words[0] = seen
        raise Timeout(f"{self.name} at {self.va:#x}", expected=value, last_seen=seen, timeout_s=timeout_s)
      # the pause never reaches past the timeout: a long AMD_USB_POLL_US must not stretch the wait by a whole pause
      if pause: rest(min(pause, max(start + timeout_s - now, 0.0)))
      seen = int.from_bytes(read(self.va, width), "little")
      self.polls += 1
      if seen >= value and self.torn: seen = self._settle(seen, 0, width)
    self._words[0] = seen
    return seen


class SignalPool:
  """Hands out 16-byte signal slots from one or more pages of host-visible memory."""

  def __init__(self, new_page: Callable[[], tuple[int, memoryview]], name: str = "signals", ticks_per_us: float = 1.0,
               make: Callable[..., Signal] = Signal):
    """new_page() -> (va, byte view) of a fresh page of host-visible, device-writable memory (or of a CPU shadow of
    device memory, with make a DeviceSignal factory); make(va, words, name, pool, ticks_per_us) builds a signal."""
    self._new_page, self.name, self.ticks_per_us, self._make = new_page, name, ticks_per_us, make
    self._free: list[tuple[int, memoryview]] = []
    self._views: list[memoryview] = []      # every slot's view, released by close()
    self._count = 0

  def _grow(self) -> None:
    va, view = self._new_page()
    if len(view) < SIGNAL_SIZE: raise ValueError(f"{self.name}: a signal page of {len(view)} bytes is too small")
    words = view.cast("B").cast("Q")
    for off in range(len(view) // SIGNAL_SIZE - 1, -1, -1):
      slot = words[off * 2:off * 2 + 2]
      self._views.append(slot)
      self._free.append((va + off * SIGNAL_SIZE, slot))

  def alloc(self, value: int = 0, name: str | None = None) -> Signal:
    if not self._free: self._grow()
    va, words = self._free.pop()
    self._count += 1
    sig = self._make(va, words, name or f"{self.name}[{self._count}]", self, self.ticks_per_us)
    sig.timestamp = 0
    sig.value = value
    return sig

  def close(self) -> None:
    """The pages go away: every signal's view is released, so that reading one afterwards raises ValueError instead
    of reading unmapped memory."""
    for v in self._views: v.release()
    self._views, self._free = [], []

  def release(self, sig: Signal) -> None:
    self._free.append((sig.va, sig._words))
    sig._pool = None
