"""PCI Express through an ASM24xx bridge (asm24.py): the GPU behind it as a PCI function with the members of
drivers/system/pci.py's PCIDevice that a driver uses (ids, config_read/config_write, enabled/enable, bars()/bar(),
map_bar() -> MMIOView, close()), plus the bridge's SRAM as the GPU's system memory and a bounded poll over USB.

Topology (as lspci shows an ASM2464PD enclosure): the bridge's own PCIe switch puts bridges on buses 0..3
(one each, device 0 function 0) and the GPU at bus 4. Nobody else enumerates this tree, so `setup()` does what a
PCI core would: bus numbers and memory windows on every bridge, the GPU's largest Resizable BAR (PCIe Base Spec 4.0
§7.8.6) made as large as it goes, every memory BAR sized (all-ones probe, PCI Local Bus 3.0 §6.2.5.1) and given an
address (prefetchable 64-bit BARs from PREF_BASE, the others from MEM_BASE, each aligned to its size), then memory
decoding and bus mastering turned on.

Access costs, in USB transfers (the figure that matters on hardware, ~100 us each): a 32-bit MMIO write 1 (posted
MWr, no completion), a read 2 (request + completion), a 64-bit write 2 (one 2-DW MWr: request + bulk data, so the
device sees a single write), a 64-bit read 3 (request, bulk data, completion), a bulk copy of N bytes through a BAR
2 per 4 MiB written (streaming), 3 per 4 MiB read, plus partial edge dwords.
"""
from __future__ import annotations

import copy
import dataclasses
import struct

from ...autogen import pci as regs
from ...errors import DeviceError, Timeout
from . import asm24, pcie
from .interface import MMIOView
from .pci import BAR, IORESOURCE_MEM, IORESOURCE_MEM_64, IORESOURCE_PREFETCH, NUM_BARS, ext_capabilities

BRIDGE_BUSES = (0, 1, 2, 3)
GPU_BUS = 4
MEM_BASE, MEM_LIMIT = 0x1000_0000, 0xFFFF_FFFF     # 32-bit non-prefetchable window of every bridge
PREF_BASE = 32 << 30                               # 64-bit prefetchable pool
STREAM_MIN = 16                                    # bytes from which a BAR write streams instead of single TLPs
STREAM_READ_MIN = 8                                # and a read: 3 transfers (request, data, completion), 2 per dword
USB_LOCK_DOMAIN = 0xFB00                           # PCI domain of the device locks of GPUs behind bridges (lock_key)
SYSMEM_SIZE = 256 << 10                            # SRAM below this: alloc_sysmem; above: SRAMStaging's buffers


@dataclasses.dataclass(frozen=True)
class Window:
  """A bridge memory the GPU reaches as system memory: `xdata` its controller address, `bus` the address the GPU
  uses for it, `size` bytes. 0xF000 (SRAM) is reached from the host through the DMA engine, the others by XDATA."""
  name: str
  xdata: int
  bus: int
  size: int


WINDOWS = {w.name: w for w in (Window("sram", 0xF000, 0x200000, 512 << 10), Window("a000", 0xA000, 0x820000, 4 << 10),
                               Window("b000", 0xB000, 0x800000, 512), Window("b800", 0xB800, 0x822000, 4 << 10))}


class TLPMMIO(MMIOView):
  """An MMIO view of a BAR built on TLPs: 32-bit accesses are one TLP each, bulk ones stream, sub-dword ones use
  byte enables. `read(offset, size)` / `write(offset, data)` take any offset and size, byte-exact."""

  def __init__(self, bridge: asm24.ASM24Bridge, base: int, size: int, name: str):
    self.bridge, self.base, self.size, self.name = bridge, base, size, name

  def _range(self, offset: int, size: int) -> None:
    if offset < 0 or size < 0 or offset + size > self.size:
      raise DeviceError(f"{self.name}: access of {size} bytes at {offset:#x} is outside the {self.size:#x}-byte BAR")

  def read32(self, offset: int) -> int:
    self._check(offset, 4)
    return self.bridge.tlp(pcie.MRD64, self.base + offset)

  def write32(self, offset: int, value: int) -> None:
    self._check(offset, 4)
    self.bridge.tlp(pcie.MWR64, self.base + offset, value)

  def read64(self, offset: int) -> int:
    """One 2-DW MRd (a signal's u64 in one read: request + completion, not two 32-bit reads)."""
    self._check(offset, 8)
    return int.from_bytes(self.bridge.stream_read(self.base + offset, 8), "little")

  def write64(self, offset: int, value: int) -> None:
    """One 2-DW MWr (a doorbell must see one 64-bit write, not two halves)."""
    self._check(offset, 8)
    self.bridge.stream_write(self.base + offset, struct.pack("<Q", value & (1 << 64) - 1))

  def _sub_read(self, offset: int, n: int) -> bytes:
    be = pcie.byte_enables(offset, n)
    value = self.bridge.tlp(pcie.MRD64, self.base + (offset & ~3), byte_enables=be)
    return value.to_bytes(4, "little")[offset & 3:(offset & 3) + n]

  def _sub_write(self, offset: int, data: bytes) -> None:
    be = pcie.byte_enables(offset, len(data))
    value = int.from_bytes(data, "little") << 8 * (offset & 3)
    self.bridge.tlp(pcie.MWR64, self.base + (offset & ~3), value, byte_enables=be)

  def _pieces(self, offset: int, size: int):
    """(offset, size, whole) pieces: a partial head dword, whole dwords, a partial tail dword."""
    end = offset + size
    head = min(end, (offset + 3) & ~3)
    if head > offset: yield offset, head - offset, False
    body = end & ~3
    if body > head: yield head, body - head, True
    if end > max(body, head): yield max(body, head), end - max(body, head), False

  def read(self, offset: int, size: int) -> bytes:
    self._range(offset, size)
    out = bytearray()
    for off, n, whole in self._pieces(offset, size):
      if not whole: out += self._sub_read(off, n)
      elif n >= STREAM_READ_MIN: out += self.bridge.stream_read(self.base + off, n)
      else: out += b"".join(self.read32(off + i).to_bytes(4, "little") for i in range(0, n, 4))
    return bytes(out)

  def write(self, offset: int, data: bytes) -> None:
    data = bytes(data)
    self._range(offset, len(data))
    for off, n, whole in self._pieces(offset, len(data)):
      piece = data[off - offset:off - offset + n]
      if not whole: self._sub_write(off, piece)
      elif n >= STREAM_MIN: self.bridge.stream_write(self.base + off, piece)
      else:
        for i in range(0, n, 4): self.write32(off + i, int.from_bytes(piece[i:i + 4], "little"))

  def read_bytes(self, offset: int, size: int) -> bytes: return self.read(offset, size)
  def write_bytes(self, offset: int, data: bytes) -> None: self.write(offset, data)


class SRAM:
  """The bridge's 512 KiB SRAM (GPU bus address WINDOWS['sram'].bus) from the host: byte-exact reads and writes at
  any offset through the DMA engine, which moves whole 512-byte sectors from a 16 KiB slot boundary (a write that
  does not cover whole sectors reads the sectors it touches first, so that the bytes around it are kept)."""

  def __init__(self, bridge: asm24.ASM24Bridge):
    self.bridge, self.window = bridge, WINDOWS["sram"]

  def _range(self, offset: int, size: int) -> None:
    if offset < 0 or size < 0 or offset + size > self.window.size:
      raise DeviceError(f"{self.bridge.name}: SRAM access of {size} bytes at {offset:#x} is outside its {self.window.size:#x} bytes")

  def read(self, offset: int, size: int) -> bytes:
    self._range(offset, size)
    if size == 0: return b""
    slot = offset // asm24.SLOT
    start = slot * asm24.SLOT
    return self.bridge.sram_read(slot, offset + size - start)[offset - start:]

  def write(self, offset: int, data: bytes) -> None:
    data = bytes(data)
    self._range(offset, len(data))
    if not data: return
    slot = offset // asm24.SLOT
    start, end = slot * asm24.SLOT, offset + len(data)
    if offset != start or (end % asm24.SECTOR and end < self.window.size):
      # partial sectors at either end: keep the bytes around the write
      old = self.bridge.sram_read(slot, -(-(end - start) // asm24.SECTOR) * asm24.SECTOR)
      data = old[:offset - start] + data + old[end - start:]
    self.bridge.sram_write(slot, data)


@dataclasses.dataclass
class SRAMBuffer:
  """System memory for the GPU in the bridge's SRAM: `bus` is its GPU address; the host reaches it with read/write
  (over USB: there is no CPU mapping of it)."""
  sram: "SRAM"
  offset: int
  size: int
  bus: int

  def read(self, offset: int = 0, size: int | None = None) -> bytes:
    size = self.size - offset if size is None else size
    self._range(offset, size)
    return self.sram.read(self.offset + offset, size)

  def write(self, offset: int, data: bytes) -> None:
    self._range(offset, len(data))
    self.sram.write(self.offset + offset, data)

  def _range(self, offset: int, size: int) -> None:
    if offset < 0 or size < 0 or offset + size > self.size:
      raise DeviceError(f"SRAM buffer at GPU address {self.bus:#x}: {size} bytes at {offset:#x} is outside its {self.size:#x}")


def poll(read, expected: int, what: str, timeout_s: float, poll_us: int, monotonic, sleep, counter=None,
         torn: bool = False) -> int:
  """Read a signal (read() -> int) until it reaches `expected` (>=); poll_us microseconds between reads (0: back to
  back). Returns the value. Raises hcq.Timeout with `what`, the expected and the last value after timeout_s.
  counter (a dict) gets counter['polls'] += 1 per read. torn: memory read byte by byte (XDATA), which a read may see
  halfway through the device's write (0x1ff -> 0x200 read as 0x2ff): a value that ends the wait is taken once two
  reads in a row agree."""
  def counted():
    if counter is not None: counter["polls"] = counter.get("polls", 0) + 1
    return read()
  deadline = monotonic() + timeout_s
  while True:
    value = counted()
    while torn and value >= expected:
      again = counted()
      if again == value: break
      value = again
    if value >= expected: return value
    if monotonic() >= deadline: raise Timeout(what, expected=expected, last_seen=value, timeout_s=timeout_s)
    if poll_us: sleep(poll_us / 1e6)


def _reworded(e: Exception, message: str) -> Exception:
  """The same error (class and attributes: a USBGone stays one) with a message that says how far a copy got."""
  err = copy.copy(e)
  err.args = (message,)
  return err


class SRAMStaging:
  """Copies between the host and memory only the GPU reaches (VRAM), bounced through the bridge's SRAM: the SRAM is
  split into `halves` buffers used in turn; the GPU copies each chunk with an engine of the vendor's
  (gpu_copy(src_bus, dst_bus, size, fence_bus, value): copy, then store `value` (u32) at fence_bus) and the host
  polls the fence over USB. Copy-in pipelines: chunk i+1 goes into the other buffer while the GPU copies chunk i; a
  buffer is refilled only after the fence says the copy out of it is done. Copy-out: the GPU fills one buffer while
  the host reads the other. Sizes and offsets are any; the fence is a u32 in the a000 window.

  sentinels=True (copyin_queued): the last sector of each half belongs to the copy-in sentinels, which nothing else
  writes (copy-out chunks are a sector shorter too); they are cleared here, so that what the SRAM held before (at
  power-on, or numbers of an earlier run) cannot release a chunk early."""

  def __init__(self, dev: "USBPCIDevice", gpu_copy, chunk: int = 128 << 10, halves: int = 2, fence_offset: int = 0,
               base: int = SYSMEM_SIZE, sentinels: bool = False, release_offset: int = 0x10):
    if chunk % asm24.SLOT or base % asm24.SLOT or base + chunk * halves > WINDOWS["sram"].size:
      raise DeviceError(f"{dev.name}: staging of {halves} x {chunk:#x} bytes at {base:#x} does not fit the SRAM in 16 KiB slots")
    self.dev, self.gpu_copy, self.chunk, self.halves, self.fence_offset = dev, gpu_copy, chunk, halves, fence_offset
    self.base = base
    self.room = chunk - asm24.SECTOR if sentinels else chunk     # copy-out's bytes per chunk
    self.fence_bus, self.release_offset = WINDOWS["a000"].bus + fence_offset, release_offset
    # the fence and copyout_queued's release counter start at 0: the GPU compares them unsigned (>=), so whatever the
    # window held (power-on contents, an earlier run's count near 2^32) would wrap and release chunks early
    for at in (fence_offset, release_offset): self._clear(at)
    self.seq = self.released = 0
    self.owed = 0      # the fence value that ends the GPU work of a failed copy (still queued: it uses the halves)
    if sentinels:
      for h in range(halves): self._write_sentinel(base + (h + 1) * chunk - asm24.SECTOR, 0)

  def _write_sentinel(self, sector: int, seq: int) -> None:
    """The sentinel sector at SRAM offset `sector` (its last dword = seq; the DMA engine writes from a slot's start)."""
    lead = sector % asm24.SLOT
    self.dev.bridge.sram_write(sector // asm24.SLOT, bytes(lead + asm24.SECTOR - 4) + seq.to_bytes(4, "little"))

  def _clear(self, offset: int) -> None:
    """Zero the u32 at a000 + offset (one read, a write per nonzero byte: none as a rule)."""
    for k, b in enumerate(self.dev.read_window("a000", offset, 4)):
      if b: self.dev.write_window("a000", offset + k, b"\0")

  def _next(self) -> int:
    if self.seq >= 0xFFFFFFFF:     # unsigned compares on the GPU: a wrapped fence would release chunks early
      raise DeviceError(f"{self.dev.name}: the bridge copy fence reached 2^32 chunks; reopen the device")
    self.seq += 1
    return self.seq

  def _wait(self, value: int, what: str) -> None:
    self.dev.wait_signal("a000", self.fence_offset, value, what=f"{self.dev.name}: {what}: copy fence "
                         f"(GPU address {self.fence_bus:#x})")

  def _settle(self) -> None:
    """Before a copy touches the halves: the GPU work a failed copy left queued is done (a copy-out's would write
    the halves over the next copy-in's chunks, which its sentinels then release: wrong data)."""
    if self.owed:
      self._wait(self.owed, "the GPU work of an earlier failed copy, which still uses the SRAM")
      self.owed = 0

  def _failed(self, last: int | None) -> None:
    """A copy failed after handing the GPU work that ends with fence value `last` (None: nothing)."""
    if last: self.owed = max(self.owed, last)

  def copyin(self, dst_bus: int, data) -> None:
    data = memoryview(bytes(data))
    issued: list[int] = []          # fence value of each chunk's copy, in order
    done = 0                        # bytes the GPU is known to have copied
    try:
      self._settle()
      for i, off in enumerate(range(0, len(data), self.chunk)):
        n = min(self.chunk, len(data) - off)
        if len(issued) >= self.halves:     # this buffer's previous chunk must be out of it
          self._wait(issued[-self.halves], f"copy-in to {dst_bus:#x}, chunk {i}")
          done = (i - self.halves + 1) * self.chunk
        buf = self.base + i % self.halves * self.chunk
        self.dev.sram.write(buf, data[off:off + n])
        value = self._next()
        self.gpu_copy(WINDOWS["sram"].bus + buf, dst_bus + off, n, self.fence_bus, value)
        issued.append(value)
      if issued: self._wait(issued[-1], f"copy-in to {dst_bus:#x}, last chunk")
    except BaseException as e:
      self._failed(issued[-1] if issued else None)
      if not isinstance(e, (DeviceError, Timeout)): raise
      raise _reworded(e, f"copy-in of {len(data)} bytes to {dst_bus:#x} failed after {done} bytes: {e}") from None

  def copyin_queued(self, dst_bus: int, data, gpu_queue, group: int = 128) -> None:
    """Copy-in with the sentinel scheme: the GPU's work for up to `group` chunks is queued up front (one submission,
    one doorbell: gpu_queue([(sentinel_bus, seq, src_bus, dst_bus, size), ...], fence_bus)), each chunk's part
    being: wait until the sentinel (the last dword of the chunk's half, written in the same bulk transfer as the
    chunk, after its data) reaches seq, copy, store seq at the fence. The host writes chunk i into half i % halves
    once the fence says the copy out of that half is done: per chunk one DMA-engine write (arm + bulk) and the fence
    reads it waits for. Halves hold chunk - 512 bytes of data (the sentinel's sector). Sequence numbers only grow
    (the fence's), so a stale sentinel or stale data never releases a chunk early. After a failure the chunks the
    GPU still waits for are released (their halves' sentinels written alone), so that its queue does not stay
    blocked; the copy's destination is then undefined, and the error says how far it got."""
    data = memoryview(bytes(data))
    room = self.chunk - asm24.SECTOR
    if self.room == self.chunk:
      raise DeviceError(f"{self.dev.name}: copyin_queued needs a staging made with sentinels=True (the halves' last sectors)")
    sram = WINDOWS["sram"].bus
    chunks = [(off, min(room, len(data) - off)) for off in range(0, len(data), room)]
    steps = []
    for i, (off, n) in enumerate(chunks):
      half = self.base + i % self.halves * self.chunk
      steps.append((sram + half + self.chunk - 4, self._next(), sram + half, dst_bus + off, n))
    queued = written = 0
    try:
      self._settle()
      for i, (off, n) in enumerate(chunks):
        if i == queued:
          gpu_queue(steps[queued:queued + group], self.fence_bus)
          queued = min(queued + group, len(steps))
        if i >= self.halves: self._wait(steps[i - self.halves][1], f"copy-in to {dst_bus:#x}, chunk {i}")
        buf = bytearray(self.chunk)
        buf[:n] = data[off:off + n]
        buf[-4:] = steps[i][1].to_bytes(4, "little")
        self.dev.bridge.sram_write((self.base + i % self.halves * self.chunk) // asm24.SLOT, buf)
        written = i + 1
      if steps: self._wait(steps[-1][1], f"copy-in to {dst_bus:#x}, last chunk")
    except BaseException as e:       # an error, or Ctrl-C: the GPU's queued chunks must not stay blocked
      self._release(steps[written:queued])
      self._failed(steps[queued - 1][1] if queued else None)
      if not isinstance(e, (DeviceError, Timeout)): raise
      done = max(written - self.halves, 0) * room
      raise _reworded(e, f"copy-in of {len(data)} bytes to {dst_bus:#x} failed after {min(done, len(data))} bytes: {e}") from None

  def _release(self, waiting) -> None:
    """Write the sentinels the GPU still waits for (the last one of each half: they compare >=); best effort."""
    last = {}
    for sentinel, seq, *_ in waiting: last[sentinel] = seq
    for sentinel, seq in last.items():
      try: self._write_sentinel(sentinel - WINDOWS["sram"].bus - (asm24.SECTOR - 4), seq)
      except (DeviceError, Timeout): return

  def copyout_queued(self, src_bus: int, size: int, gpu_queue, group: int = 128) -> bytes:
    """Copy-out with the GPU's work queued up front (gpu_queue([(release_bus, release, src_bus, dst_bus, size, seq),
    ...], fence_bus); release_bus None for the first `halves` chunks): chunk i's part waits until the u32 release
    counter (a000 window + release_offset) reaches `release` (the host has read the chunk that used the half
    before), copies into half i % halves, stores seq at the fence. The host waits for the fence, reads the half (arm
    + bulk) and counts the release up, writing only the counter's bytes that change, lowest first (one XDATA write,
    as a rule: a GPU read between two byte writes sees a smaller value, never a larger one)."""
    room, sram, release_offset = self.room, WINDOWS["sram"].bus, self.release_offset
    release_bus = WINDOWS["a000"].bus + release_offset
    released = start = self.released
    chunks = [(off, min(room, size - off)) for off in range(0, size, room)]
    steps = []
    for i, (off, n) in enumerate(chunks):
      rel = None if i < self.halves else (start + i - self.halves + 1) & 0xFFFFFFFF
      steps.append((None if rel is None else release_bus, rel, src_bus + off, sram + self.base + i % self.halves * self.chunk,
                    n, self._next()))
    out, queued = bytearray(), 0
    try:
      self._settle()
      for i, (off, n) in enumerate(chunks):
        if i == queued:
          gpu_queue(steps[queued:queued + group], self.fence_bus)
          queued = min(queued + group, len(steps))
        self._wait(steps[i][5], f"copy-out from {src_bus:#x}, chunk {i}")
        out += self.dev.sram.read(self.base + i % self.halves * self.chunk, n)
        released = self.released = self._count_up(release_offset, released)
    except BaseException as e:       # an error, or Ctrl-C
      try:   # let the GPU's queued chunks run on (they copy into halves nobody reads any more)
        if queued:
          self.dev.write_window("a000", release_offset, ((start + queued) & 0xFFFFFFFF).to_bytes(4, "little"))
          self.released = (start + queued) & 0xFFFFFFFF
      except (DeviceError, Timeout): pass
      self._failed(steps[queued - 1][5] if queued else None)
      if not isinstance(e, (DeviceError, Timeout)): raise
      raise _reworded(e, f"copy-out of {size} bytes from {src_bus:#x} failed after {len(out)} bytes: {e}") from None
    return bytes(out)

  def _count_up(self, offset: int, value: int) -> int:
    new = (value + 1) & 0xFFFFFFFF
    old_b, new_b = value.to_bytes(4, "little"), new.to_bytes(4, "little")
    for k in range(4):
      if old_b[k] != new_b[k]: self.dev.write_window("a000", offset + k, new_b[k:k + 1])
    return new

  def copyout(self, src_bus: int, size: int) -> bytes:
    out = bytearray()
    chunks = [(i, off, min(self.room, size - off)) for i, off in enumerate(range(0, size, self.room))]
    fences: dict[int, int] = {}
    def issue(i, off, n):
      fences[i] = self._next()
      self.gpu_copy(src_bus + off, WINDOWS["sram"].bus + self.base + i % self.halves * self.chunk, n, self.fence_bus, fences[i])
    try:
      self._settle()
      for c in chunks[:self.halves]: issue(*c)
      for i, off, n in chunks:
        self._wait(fences[i], f"copy-out from {src_bus:#x}, chunk {i}")
        out += self.dev.sram.read(self.base + i % self.halves * self.chunk, n)
        if i + self.halves < len(chunks): issue(*chunks[i + self.halves])
    except BaseException as e:
      self._failed(max(fences.values(), default=None))
      if not isinstance(e, (DeviceError, Timeout)): raise
      raise _reworded(e, f"copy-out of {size} bytes from {src_bus:#x} failed after {len(out)} bytes: {e}") from None
    return bytes(out)


class USBPCIDevice:
  """The PCI function at bus 4 behind an opened bridge. setup() (run by open()) programs the tree; afterwards config
  accesses and BAR views are TLPs. `addr` is the function's address in the bridge's own PCI tree."""

  def __init__(self, os, bridge: asm24.ASM24Bridge, bus: int = GPU_BUS, timeout_s: float | None = None):
    self.os, self.bridge, self.bus = os, bridge, bus
    self.addr = f"0000:{bus:02x}:00.0"
    self.name = f"{bridge.name} {self.addr}"
    self.timeout_s = timeout_s if timeout_s is not None else os.config.timeout_s
    self.poll_us = os.config.amd_usb_poll_us
    self._bars: list[BAR] = [BAR(i, 0, 0, 0) for i in range(NUM_BARS)]
    self.views: list[MMIOView] = []
    self.sram = SRAM(bridge)
    self._sysmem_next = 0
    self.stats: dict = {}
    self.index = 0

  @property
  def lock_key(self) -> tuple[str, str]:
    """The device lock of the GPU behind bridge #index (drivers/system/locks.py): its address in the bridge's tree
    with the PCI domain USB_LOCK_DOMAIN + index, a domain no host bridge of ours has, so that it never collides with
    the host function at the same bus number (hcq-smi shows the holder of that name)."""
    return "am", f"{USB_LOCK_DOMAIN + self.index:04x}{self.addr[4:]}"

  @classmethod
  def open(cls, os, index: int = 0) -> "USBPCIDevice":
    bridge = asm24.ASM24Bridge.open(os, index)
    dev = cls(os, bridge)
    dev.index = index
    try: dev.setup()
    except BaseException:
      bridge.close()
      raise
    return dev

  # ---- configuration space through CfgRd/CfgWr (type 0 on bus 0, type 1 beyond: §5.2)
  def config_read_at(self, bus: int, offset: int, size: int = 4) -> int:
    self._cfg_check(bus, offset, size)
    fmt_type = pcie.CFGRD1 if bus else pcie.CFGRD0
    value = self._cfg_tlp(fmt_type, bus, offset, 0, pcie.byte_enables(offset, size))
    return value >> 8 * (offset & 3) & (1 << 8 * size) - 1

  def config_write_at(self, bus: int, offset: int, value: int, size: int = 4) -> None:
    self._cfg_check(bus, offset, size)
    if not 0 <= value < 1 << 8 * size:
      raise DeviceError(f"{self.bridge.name}: value {value:#x} does not fit a {size}-byte config register at {offset:#x}")
    fmt_type = pcie.CFGWR1 if bus else pcie.CFGWR0
    self._cfg_tlp(fmt_type, bus, offset, value << 8 * (offset & 3), pcie.byte_enables(offset, size))

  def _cfg_check(self, bus: int, offset: int, size: int) -> None:
    if size not in (1, 2, 4) or offset < 0 or offset + size > 4096 or offset % size:
      raise DeviceError(f"{self.bridge.name}: config access of {size} bytes at {offset:#x} on bus {bus} is outside "
                        f"the 4 KiB config space or misaligned")

  def _cfg_tlp(self, fmt_type: int, bus: int, offset: int, value: int, be: int) -> int:
    """A config TLP; a CRS completion (the function is not ready yet, PCIe §2.3.1) is retried until the timeout."""
    address = pcie.config_address(bus, 0, 0, offset & ~3)
    deadline = self.os.monotonic() + self.timeout_s
    while True:
      try: return self.bridge.tlp(fmt_type, address, value, be) or 0
      except asm24.CompletionError as e:
        if e.status != pcie.CPL_CRS or self.os.monotonic() >= deadline: raise
        self.bridge.retries["crs"] += 1
        self.os.sleep(0.001)

  def config_read(self, offset: int, size: int = 4) -> int: return self.config_read_at(self.bus, offset, size)
  def config_write(self, offset: int, value: int, size: int = 4) -> None: self.config_write_at(self.bus, offset, value, size)

  def config_read_bytes(self, offset: int, size: int) -> bytes:
    return b"".join(self.config_read(o, 4).to_bytes(4, "little") for o in range(offset & ~3, offset + size, 4))[offset & 3:][:size]

  # ---- identity
  @property
  def vendor(self) -> int: return self.config_read(regs.PCI_VENDOR_ID, 2)
  @property
  def device(self) -> int: return self.config_read(regs.PCI_DEVICE_ID, 2)
  @property
  def class_code(self) -> int: return self.config_read(regs.PCI_CLASS_REVISION) >> 8
  @property
  def revision(self) -> int: return self.config_read(regs.PCI_CLASS_REVISION, 1)

  @property
  def enabled(self) -> bool: return bool(self.config_read(regs.PCI_COMMAND, 2) & regs.PCI_COMMAND_MEMORY)

  def enable(self) -> None:
    cmd = self.config_read(regs.PCI_COMMAND, 2)
    self.config_write(regs.PCI_COMMAND, cmd | regs.PCI_COMMAND_MEMORY, 2)

  def reset(self) -> None:
    raise DeviceError(f"{self.name}: no function reset through the bridge (power-cycle the link: bridge.power)")

  # ---- bring-up
  def setup(self) -> None:
    """Power the link, number the buses, open the windows, resize and assign the GPU's BARs, enable it."""
    if not self.bridge.link_up:
      self.bridge.power(True)
      poll(self.bridge.ltssm, asm24.LTSSM_L0, f"{self.bridge.name}: PCIe link (LTSSM {asm24.LTSSM_STATE:#x})",
           self.timeout_s, 1000, self.os.monotonic, self.os.sleep)
    for bus in BRIDGE_BUSES: self._setup_bridge(bus)
    self.resize_largest_bar()
    self._assign_bars()
    cmd = self.config_read(regs.PCI_COMMAND, 2)
    self.config_write(regs.PCI_COMMAND, cmd | regs.PCI_COMMAND_MEMORY | regs.PCI_COMMAND_MASTER, 2)

  def _setup_bridge(self, bus: int) -> None:
    # primary, secondary, subordinate bus numbers in one write (latency timer 0)
    self.config_write_at(bus, regs.PCI_PRIMARY_BUS, bus | (bus + 1) << 8 | GPU_BUS << 16)
    self.config_write_at(bus, regs.PCI_MEMORY_BASE, (MEM_BASE >> 16) & 0xFFF0, 2)
    self.config_write_at(bus, regs.PCI_MEMORY_LIMIT, (MEM_LIMIT >> 16) & 0xFFF0, 2)
    self.config_write_at(bus, regs.PCI_PREF_MEMORY_BASE, (PREF_BASE >> 16) & 0xFFF0 | regs.PCI_PREF_RANGE_TYPE_64, 2)
    self.config_write_at(bus, regs.PCI_PREF_MEMORY_LIMIT, 0xFFF0 | regs.PCI_PREF_RANGE_TYPE_64, 2)
    self.config_write_at(bus, regs.PCI_PREF_BASE_UPPER32, PREF_BASE >> 32)
    self.config_write_at(bus, regs.PCI_PREF_LIMIT_UPPER32, 0xFFFFFFFF)
    cmd = self.config_read_at(bus, regs.PCI_COMMAND, 2)
    self.config_write_at(bus, regs.PCI_COMMAND, cmd | regs.PCI_COMMAND_IO | regs.PCI_COMMAND_MEMORY | regs.PCI_COMMAND_MASTER, 2)

  def ext_capabilities(self):
    """(id, offset) of every extended capability (drivers/system/pci.py ext_capabilities)."""
    return ext_capabilities(self)

  def resize_largest_bar(self) -> int | None:
    """Set the first Resizable BAR entry to the largest size it supports; returns that size (None: no capability)."""
    rebar = next((off for cap, off in self.ext_capabilities() if cap == regs.PCI_EXT_CAP_ID_REBAR), None)
    if rebar is None: return None
    cmd = self.config_read(regs.PCI_COMMAND, 2)
    self.config_write(regs.PCI_COMMAND, cmd & ~regs.PCI_COMMAND_MEMORY & 0xFFFF, 2)   # no decoding while it changes
    sizes = self.config_read(rebar + regs.PCI_REBAR_CAP) & regs.PCI_REBAR_CAP_SIZES
    if not sizes: raise DeviceError(f"{self.name}: Resizable BAR capability at {rebar:#x} lists no size")
    enc = sizes.bit_length() - 1 - 4            # bit 4 = 1 MiB
    ctrl = self.config_read(rebar + regs.PCI_REBAR_CTRL)
    self.config_write(rebar + regs.PCI_REBAR_CTRL, ctrl & ~regs.PCI_REBAR_CTRL_BAR_SIZE | enc << regs.PCI_REBAR_CTRL_BAR_SHIFT)
    return 1 << (20 + enc)

  def _size_bar(self, index: int) -> tuple[int, int, bool, bool]:
    """(size, flags register, 64-bit, prefetchable) by the all-ones probe (PCI 3.0 §6.2.5.1); 0 = unimplemented."""
    reg = regs.PCI_BASE_ADDRESS_0 + 4 * index
    old = self.config_read(reg)
    if old & regs.PCI_BASE_ADDRESS_SPACE_IO: return 0, old, False, False
    is64 = bool(old & regs.PCI_BASE_ADDRESS_MEM_TYPE_64)
    self.config_write(reg, 0xFFFFFFFF)
    lo = self.config_read(reg) & 0xFFFFFFF0
    self.config_write(reg, old)
    hi = 0xFFFFFFFF
    if is64:
      old_hi = self.config_read(reg + 4)
      self.config_write(reg + 4, 0xFFFFFFFF)
      hi = self.config_read(reg + 4)
      self.config_write(reg + 4, old_hi)
    mask = hi << 32 | lo
    if not lo and (not is64 or not hi): return 0, old, is64, False
    return (~mask & 0xFFFFFFFFFFFFFFFF) + 1, old, is64, bool(old & regs.PCI_BASE_ADDRESS_MEM_PREFETCH)

  def _assign_bars(self) -> None:
    cmd = self.config_read(regs.PCI_COMMAND, 2)
    self.config_write(regs.PCI_COMMAND, cmd & ~regs.PCI_COMMAND_MEMORY & 0xFFFF, 2)   # no decoding while sizing
    pref, mem = PREF_BASE, MEM_BASE
    index = 0
    while index < NUM_BARS:
      size, _, is64, prefetch = self._size_bar(index)
      if size:
        if prefetch and is64:
          start = pref = -(-pref // size) * size
          pref += size
        else:
          start = mem = -(-mem // size) * size
          mem += size
          if mem - 1 > MEM_LIMIT: raise DeviceError(f"{self.name}: BAR{index} of {size:#x} bytes does not fit the 32-bit window")
        reg = regs.PCI_BASE_ADDRESS_0 + 4 * index
        self.config_write(reg, start & 0xFFFFFFFF)
        if is64: self.config_write(reg + 4, start >> 32)
        flags = IORESOURCE_MEM | (IORESOURCE_MEM_64 if is64 else 0) | (IORESOURCE_PREFETCH if prefetch else 0)
        self._bars[index] = BAR(index, start, start + size - 1, flags)
      index += 2 if is64 else 1

  # ---- BARs
  def bars(self) -> list[BAR]: return list(self._bars)

  def bar(self, index: int) -> BAR:
    if not 0 <= index < NUM_BARS: raise DeviceError(f"{self.name}: there is no BAR {index} (0-{NUM_BARS - 1})")
    return self._bars[index]

  def map_bar(self, index: int, size: int | None = None, offset: int = 0) -> TLPMMIO:
    bar = self.bar(index)
    if not bar.is_memory or not bar.size: raise DeviceError(f"{self.name}: BAR {index} is not a memory BAR ({bar!r})")
    size = bar.size - offset if size is None else size
    if offset < 0 or size <= 0 or offset + size > bar.size:
      raise DeviceError(f"{self.name}: window {offset:#x}+{size:#x} is outside BAR {index} of {bar.size:#x} bytes")
    view = TLPMMIO(self.bridge, bar.start + offset, size, f"{self.name} BAR{index}")
    self.views.append(view)
    return view

  # ---- system memory for the GPU: the bridge's windows
  def alloc_sysmem(self, size: int, align: int = 0x1000) -> SRAMBuffer:
    """A buffer in the SRAM below SYSMEM_SIZE (a bump allocator: it lives as long as the device)."""
    start = -(-self._sysmem_next // align) * align
    if size <= 0 or start + size > SYSMEM_SIZE:
      raise DeviceError(f"{self.name}: no room for {size:#x} bytes of system memory in the bridge SRAM "
                        f"({SYSMEM_SIZE - start:#x} of {SYSMEM_SIZE:#x} left)")
    self._sysmem_next = start + size
    return SRAMBuffer(self.sram, start, size, WINDOWS["sram"].bus + start)

  def window(self, name: str) -> Window: return WINDOWS[name]

  def read_window(self, name: str, offset: int, size: int) -> bytes:
    """Bytes of an XDATA window (a000, b000, b800: signals, small queues) as the host sees them."""
    w = WINDOWS[name]
    if offset < 0 or offset + size > w.size: raise DeviceError(f"{self.name}: {name} window read of {size} at {offset:#x} is outside {w.size:#x}")
    return self.bridge.xdata_read(w.xdata + offset, size)

  def write_window(self, name: str, offset: int, data: bytes) -> None:
    w = WINDOWS[name]
    if offset < 0 or offset + len(data) > w.size: raise DeviceError(f"{self.name}: {name} window write of {len(data)} at {offset:#x} is outside {w.size:#x}")
    self.bridge.xdata_write(w.xdata + offset, data)

  def wait_signal(self, window: str, offset: int, expected: int, timeout_s: float | None = None, what: str | None = None) -> int:
    """Poll a 32-bit signal in a window over USB until it reaches `expected`, AMD_USB_POLL_US (Config.amd_usb_poll_us)
    between polls, the value that ends the wait read twice (the controller reads XDATA byte by byte: poll's torn);
    hcq.Timeout names the signal, the expected and the last value."""
    what = what or f"{self.name}: signal at {window} window +{offset:#x} (GPU address {WINDOWS[window].bus + offset:#x})"
    read = lambda: int.from_bytes(self.read_window(window, offset, 4), "little")
    return poll(read, expected, what, self.timeout_s if timeout_s is None else timeout_s, self.poll_us,
                self.os.monotonic, self.os.sleep, self.stats, torn=True)

  def close(self) -> None:
    self.views = []
    if self.bridge is not None:
      self.bridge.close()
      self.bridge = None

  def __enter__(self): return self
  def __exit__(self, *exc): self.close()
  def __repr__(self): return f"USBPCIDevice({self.name})"
