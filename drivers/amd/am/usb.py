"""AMD over USB (issue 18): the AM driver on a Navi 31 behind an ASM24xx USB4-to-PCIe bridge, and the runtime device on
it. hcq.open("USB+AMD") / hcq.open("MOCKUSB+AMD").

Behind the bridge the CPU maps nothing of the GPU: every access is a USB transfer carrying a PCIe TLP
(drivers/system/usbpci.py, its BARs tlpmmio.py), ~100 us each on hardware, so what matters is how many a launch costs.

Where each kind of memory lives:
  - all runtime memory (rings, the read/write-pointer page, EOP, signals, launch data, IBs, code, buffers) is VRAM:
    AM's VRAM allocator (memory.VRAM.alloc_user) mapped by the GPU page tables at a VA of the process range (one
    streaming TLP per page table), no CPU mapping. The GPU reaches it at full speed; the host through the VRAM BAR's
    TLPs.
  - memory the runtime writes or reads (session kinds "gtt"/"userptr": rings, signals, launch data, IBs) gets a CPU
    shadow (a bytearray view as Mem.cpu, so the runtime's code is the same as on PCI) made coherent by the
    coherence layer below, at the points where the runtime hands work over, never per store:
      * a ring's written span is pushed (one streaming MWr) by the doorbell function, then the HDP is flushed (one
        posted register write: the BAR writes reach VRAM before the engine reads them), then the doorbell (one
        64-bit MWr: the write pointer; the wptr page is not pushed: the engines take it from the doorbell);
      * a launch's kernel arguments are pushed when the launch's words are made (one streaming MWr);
      * bound launches' kernargs and IB are pushed once, when recorded;
      * signals are DeviceSignals (drivers/hcq/signal.py): a store goes through at once, a read goes through the
        device (VRAM: one 8-byte MRd; a wait for a 32-bit value polls the low word), and a wait polls with
        AMD_USB_POLL_US (Config.amd_usb_poll_us) between polls, bounded by the timeout;
      * a ring's read pointer is read from the device only while the ring waits for space (Ring.refresh).
    VRAM memory (kind "vram": buffers, code, scratch) has no CPU view: copies (below).
  - the bridge's windows, mapped by the GPU page tables as system pages at VAs of the process range: the SRAM
    (512 KiB: SRAMStaging's two 256 KiB halves; the runtime places nothing else there) and the a000 window (4 KiB
    of XDATA: SRAMStaging's fence at +0, the timeline signal at +0x100, each poll of it one XDATA read, one
    transfer, where a 32-bit MRd of VRAM is two; its stores are one-byte XDATA writes, 8 per u64, so the signals
    that are written per timed launch stay in VRAM).
  - copies of buffers: copy_path "auto" (the default) takes, per direction, whichever of the two paths below the
    first copy of at least 128 KiB measures cheaper in round trips, the host's waits for the bridge (usbcopypath.py:
    its first 64 KiB through each; on the mock the BAR's: 16 MiB in 23 transfers with that measurement, 10 after);
    "sram" and "bar" force one. Both send their bursts with asm24.BULK_IN_FLIGHT bulk requests in flight
    (usbpipeline.py): 16 MiB in on the mock, BAR 10 transfers in 4 round trips, SRAM 263 in 72 (bench/usb.py).
    copy_path "sram" (issue 18's scheme): SRAMStaging with the sentinel/fence
    scheme for copy-in (copyin_queued): the SDMA work of up to 128 chunks queued in one submission (one doorbell),
    each chunk's part waiting (POLL_REGMEM >=) for the chunk's sentinel, which the host writes in the same bulk
    transfer as the chunk's data (the last dword of its 256 KiB half), then copying into VRAM and storing the fence
    the host polls in a000 (AMD_USB_POLL_US apart; the value that ends the wait read twice: XDATA reads can be
    torn) before it refills that half: ~4 transfers per 256 KiB. Copy-out (copyout_queued) the same way round: the
    GPU's chunks queued at once, each waiting for the host's release of its half, the host waiting for the fence,
    reading the half and counting the release up: ~5 per chunk (16 MiB on the mock: in 263, out 330). A failed or
    interrupted copy releases what it queued, and the next copy waits for that work first.
    copy_path "bar" streams through the VRAM BAR instead (4 MiB per request): fewer transfers still (16 MiB in: 10,
    out: 14), but the bandwidth on hardware depends on the bridge's TLP engine, which the mock cannot tell.

Costs per launch (counted through the mock bridge by bench/usb.py --launch): kernel arguments 2 transfers
(control + bulk), ring span 2, HDP flush 1, doorbell 2; then 1 per poll of the timeline signal (an XDATA read of the
a000 window) and 1 more read that confirms the value ending the wait.
"""
from __future__ import annotations

import bisect

from ....compiler import queue as Q
from ....compiler.ir import UOp
from ....errors import DeviceError
from ...hcq.engine import COPY_DST, COPY_SRC, FIRST_VENDOR_SLOT, P_DST, P_SRC, TIMELINE, TIMELINE_VALUE, V_TIMELINE
from ...hcq.runtime import Submission
from ...hcq.signal import DeviceSignal
from ..device import AMDDevice
from ..packets import COPY
from .device import AMDev
from ...system.bridgemem import SYSMEM_SIZE, WINDOWS
from .session import PAGE, AMSession, Mem
from .usbcopypath import CheaperPath
from .usbstaging import SRAMStaging
from .va import PROCESS_VA

PTR_UNIT = {"compute": 4, "sdma": 1}    # bytes per write-pointer step of each queue kind
STAGING_CHUNK = 256 << 10              # SRAMStaging's halves: the 512 KiB SRAM in two
TIMELINE_AT = 0x100                    # the timeline signal's offset in the a000 window (SRAMStaging's fence is at 0)
FENCE_SLOT = FIRST_VENDOR_SLOT + 1     # SRAMStaging's fence: a placeholder given at submit, as the copy's buffers are
FENCE, P_FENCE = Q.signal(FENCE_SLOT, "copy fence"), ("param", FENCE_SLOT)
FENCE_VALUE, V_FENCE = UOp.variable("fence", 0, 2**32 - 1), ("var", "fence")
SENTINEL_SLOT = FIRST_VENDOR_SLOT + 2   # a copy-in chunk's sentinel, its sequence number given at submit
SENTINEL, P_SENTINEL = Q.signal(SENTINEL_SLOT, "copy-in sentinel"), ("param", SENTINEL_SLOT)
SEQ, V_SEQ = UOp.variable("seq", 0, 2**32 - 1), ("var", "seq")


class AMUSBSession(AMSession):
  """AMSession on a GPU behind a USB bridge (see the module docstring): every kind of memory is VRAM (AMSession's
  _alloc_vram: memory.VRAM.alloc_user, mapped by VRAM PTEs at a VA of the process range, no CPU mapping); the kinds
  the runtime writes and reads get a CPU shadow as Mem.cpu."""
  name = "USB"

  def __init__(self, os, index: int, config, label: str | None = None, trace=None):
    from ...system.usbpci import USBPCIDevice
    self.os, self.config, self.windows = os, config, {}
    self.label = label or f"USB+AMD:{index}"
    self._mems, self._queues = {}, []
    self._starts: list[int] = []         # the VAs of _mems, sorted (read/write find their memory)
    dev = USBPCIDevice.open(os, index)
    try: self.am = AMDev(os, None, config, trace=trace, label=f"{self.label} ({dev.name})", device=dev)
    except BaseException:
      dev.close()
      raise
    self.label, self.usb, self.poll_s = self.am.label, dev, dev.poll_us / 1e6
    self.bar = self.am.pci.vram
    try: self._setup()
    except BaseException:
      self.close()
      raise

  def _setup(self) -> None:
    super()._setup()
    # the bridge's windows the GPU reaches as system memory, at VAs of the process range: the SRAM (SRAMStaging's
    # buffers) and the a000 window (the copy fence)
    self.windows: dict[str, tuple[int, int, int]] = {}    # name -> (VA, bus address, size)
    self._map_window("sram", 0, WINDOWS["sram"].size)
    self._map_window("a000", 0, WINDOWS["a000"].size)

  def _map_window(self, name: str, offset: int, size: int) -> None:
    bus = WINDOWS[name].bus + offset
    va = PROCESS_VA.alloc(size, self.label)
    try: self.am.gmc.map(va, [bus + off for off in range(0, size, PAGE)], system=True)
    except BaseException:
      PROCESS_VA.free(va, size)
      raise
    self.windows[name] = (va, bus, size)

  def bus_to_va(self, addr: int) -> int:
    """The GPU VA of a bus address in a mapped window; any other address is already a GPU VA (a buffer's)."""
    for va, bus, size in self.windows.values():
      if bus <= addr < bus + size: return va + addr - bus
    return addr

  def _close(self, am) -> None:
    try:
      if am.pci is not None:
        for va, _bus, size in getattr(self, "windows", {}).values():
          am.gmc.unmap(va, size // PAGE)
          PROCESS_VA.free(va, size)
      self.windows = {}
    finally: super()._close(am)

  # ---- memory
  def alloc(self, size: int, kind: str = "vram", cpu_access: bool = False) -> Mem:
    if kind not in ("vram", "gtt", "userptr"): raise ValueError(f"unknown memory kind {kind!r}")
    with self.am.lock:
      mem = self._alloc_vram(size, cpu_access=False)
      if kind != "vram":          # runtime memory: a zeroed shadow over VRAM zeroed once here
        mem.cpu = memoryview(bytearray(mem.size))
        self.am.vram.fill(mem.vram.offset, mem.size)
      bisect.insort(self._starts, mem.va)
      return mem

  def _free(self, mem: Mem) -> None:
    super()._free(mem)
    del self._starts[bisect.bisect_left(self._starts, mem.va)]

  def _offset(self, va: int, size: int) -> int:
    """The VRAM offset of GPU address va, for size bytes inside one allocation."""
    i = bisect.bisect_right(self._starts, va) - 1
    mem = self._mems.get(self._starts[i]) if i >= 0 else None
    if mem is None or va + size > mem.va + mem.size:
      raise DeviceError(f"{self.label}: GPU address {va:#x}+{size:#x} is not inside one allocation of this device")
    return mem.vram.offset + va - mem.va

  def read(self, va: int, size: int) -> bytes:
    """Device memory at GPU address va through the VRAM BAR (an aligned u64: one 2-DW MRd)."""
    off = self._offset(va, size)
    if size == 8 and not off & 7: return self.bar.read64(off).to_bytes(8, "little")
    return self.bar.read(off, size)

  def write(self, va: int, data) -> None:
    self.bar.write(self._offset(va, len(data)), data)

  # ---- queues
  def doorbell(self, q):
    """Push the ring's span written since the last doorbell (one streaming MWr, two at the ring's end), flush the HDP
    (one posted register write: the BAR writes since the last doorbell, the ring's and the kernel arguments', reach
    VRAM before the engine reads them; the GPU reads nothing the host wrote through the BAR before a doorbell), then
    the doorbell: one 64-bit MWr of the write pointer."""
    bar, db, db_off, hdp_flush = self.bar, self.doorbells, q.doorbell_offset, self.am.nbio.hdp_flush
    shadow, base, size, unit = q.ring.cpu, q.ring.vram.offset, q.ring.size, PTR_UNIT[q.kind]
    pushed = [0]         # bytes of the ring pushed since the queue began
    def ring(value: int) -> None:
      start, end = pushed[0], value * unit
      s, e = start % size, end % size
      if end - start >= size: bar.write(base, shadow)
      elif s < e: bar.write(base + s, shadow[s:e])
      elif end != start:
        bar.write(base + s, shadow[s:])
        if e: bar.write(base, shadow[:e])
      pushed[0] = end
      hdp_flush()
      db.write64(db_off, value)
    return ring


class USBAMDDevice(AMDDevice):
  """AMDDevice over AMUSBSession: the coherence layer of the module docstring. Every hook is chosen here, by class: the
  PCI and KFD devices run the same code as before with no check per launch."""
  launch_data_size = 1 << 20          # kernel arguments pushed per launch: a smaller ring costs only VRAM
  staging_count = 0                   # copies go through the bridge (SRAM or BAR), not the runtime's staging buffers
  copy_path = "auto"                  # "sram": SRAMStaging through the bridge's SRAM; "bar": streamed through BAR0;
                                      # "auto": the one the first large copy measures cheaper (usbcopypath.py)

  def _signal_page(self):
    """The first signal (the timeline, polled by every wait) lives in the bridge's a000 window: one XDATA read per
    poll (a 32-bit MRd of VRAM is two transfers); the others in VRAM (their stores, e.g. the timestamps a timed
    launch clears, are 2 transfers there, 8 one-byte XDATA writes in the window)."""
    if not self._window_signal_taken:
      self._window_signal_taken = True
      va = self.session.windows["a000"][0] + TIMELINE_AT
      return va, memoryview(bytearray(16))
    return super()._signal_page()

  _window_signal_taken = False

  def signal_type(self, va, words, name, pool, ticks_per_us):
    window_va = self.session.windows["a000"][0]
    if window_va <= va < window_va + WINDOWS["a000"].size:
      usb = self.session.usb
      read = lambda at, n: usb.read_window("a000", at - window_va, n)
      write = lambda at, data: usb.write_window("a000", at - window_va, bytes(data))
      return DeviceSignal(va, words, name, pool, ticks_per_us, read=read, write=write, poll_s=self.session.poll_s,
                          sleep=self.os.sleep, torn=True)
    return DeviceSignal(va, words, name, pool, ticks_per_us, read=self.session.read, write=self.session.write,
                        poll_s=self.session.poll_s, sleep=self.os.sleep)

  def _rptr_refresh(self, hwq, rptr):
    at, read = hwq.gart.va + hwq.rptr_offset, self.session.read
    def refresh() -> None: rptr[0] = int.from_bytes(read(at, 8), "little")
    return refresh

  def _block(self, seconds: float) -> None:
    """No interrupts over USB: the IH ring is read through the bridge for faults (hcq.GPUFault: a VM fault, with its
    address), then a wait sleeps AMD_USB_POLL_US (a ring waiting for space between reads of its read pointer; a
    DeviceSignal's wait asks with no time, every FAULT_CHECK_S)."""
    self.session.wait_events(0)
    if seconds: self.os.sleep(min(seconds, max(self.session.poll_s, 20e-6)))

  def _launch_words(self, prog, shape, explicit: bytes, value: int):
    words = super()._launch_words(prog, shape, explicit, value)
    if shape.data_size:
      off, n = self.launch_data.newest()
      self.session.write(self.launch_data.va + off, self._launch_view[off:off + n])
    return words

  def _record(self, planned):
    rec = super()._record(planned)
    for mem in (rec.kernargs, getattr(rec, "ib", None)):
      if mem is not None: self.session.write(mem.va, mem.cpu)
    return rec

  # ---- copies: through the bridge's SRAM (SRAMStaging: double-buffered, fenced) or streamed through the VRAM BAR
  def _setup(self) -> None:
    super()._setup()
    # the whole SRAM as two 256 KiB halves (the runtime puts nothing else there: its memory is VRAM); claimed from
    # the bridge's system-memory allocator so that nothing else is placed in it
    usb = self.session.usb
    usb.alloc_sysmem(SYSMEM_SIZE)
    self.staging = SRAMStaging(usb, self._gpu_copy, chunk=STAGING_CHUNK, base=0, sentinels=True)
    self.copy_paths = CheaperPath(lambda: usb.bridge.round_trips)   # the host's waits: what a copy costs in time
    self._fenced: dict[int, object] = {}
    self._sentinel_copies: dict[int, object] = {}

  def _gpu_copy(self, src: int, dst: int, size: int, fence: int, value: int) -> None:
    """SRAMStaging's engine: an SDMA copy, then the fence store (bus addresses of the bridge's windows become their
    VAs), on the copy engine after the work before it (the runtime's cross-engine wait)."""
    cb = self._fenced.get(size)
    if cb is None:
      prog = Q.queue(COPY, Q.copy(Q.buffer(COPY_DST, size), Q.buffer(COPY_SRC, size), size), Q.store(FENCE, FENCE_VALUE),
                     Q.store(TIMELINE, TIMELINE_VALUE))
      cb = self._fenced[size] = self.copy.build(prog)
    bus_to_va = self.session.bus_to_va
    with Submission(self, self.copy, ("a copy of {} bytes through the bridge SRAM to {:#x}", size, dst)) as sub:
      sub.add(cb.fill({P_DST: bus_to_va(dst), P_SRC: bus_to_va(src), P_FENCE: bus_to_va(fence), V_FENCE: value,
                       V_TIMELINE: sub.value}))
      sub.signalled = True

  def _gpu_queue(self, steps, fence: int) -> None:
    """SRAMStaging.copyin_queued's GPU part, one submission: per chunk wait for its sentinel (SDMA POLL_REGMEM >=),
    copy, store the fence."""
    bus_to_va, words = self.session.bus_to_va, []
    for sentinel, seq, src, dst, size in steps:
      cb = self._sentinel_copies.get(size)
      if cb is None:
        prog = Q.queue(COPY, Q.wait(SENTINEL, SEQ), Q.copy(Q.buffer(COPY_DST, size), Q.buffer(COPY_SRC, size), size),
                       Q.store(FENCE, FENCE_VALUE))
        cb = self._sentinel_copies[size] = self.copy.build(prog)
      words.append(cb.fill({P_SENTINEL: bus_to_va(sentinel), V_SEQ: seq, P_DST: bus_to_va(dst), P_SRC: bus_to_va(src),
                            P_FENCE: bus_to_va(fence), V_FENCE: seq}))
    with Submission(self, self.copy, ("a copy of {} chunks through the bridge SRAM to {:#x}", len(steps), steps[0][3])) as sub:
      for w in words: sub.add(w)

  def _gpu_queue_out(self, steps, fence: int) -> None:
    """SRAMStaging.copyout_queued's GPU part, one submission: per chunk wait for the host's release of its half
    (SDMA POLL_REGMEM >= on the release counter; none for the first chunks), copy, store the fence."""
    bus_to_va, words = self.session.bus_to_va, []
    for release_bus, release, src, dst, size, seq in steps:
      key = (size, release_bus is not None)
      cb = self._sentinel_copies.get(key)
      if cb is None:
        els = [Q.wait(SENTINEL, SEQ)] if key[1] else []
        els += [Q.copy(Q.buffer(COPY_DST, size), Q.buffer(COPY_SRC, size), size), Q.store(FENCE, FENCE_VALUE)]
        cb = self._sentinel_copies[key] = self.copy.build(Q.queue(COPY, *els))
      values = {P_DST: bus_to_va(dst), P_SRC: bus_to_va(src), P_FENCE: bus_to_va(fence), V_FENCE: seq}
      if key[1]: values.update({P_SENTINEL: bus_to_va(release_bus), V_SEQ: release})
      words.append(cb.fill(values))
    with Submission(self, self.copy, ("a copy of {} chunks from {:#x} through the bridge SRAM", len(steps), steps[0][2])) as sub:
      for w in words: sub.add(w)

  def _copyin(self, buf, src: memoryview, offset: int) -> None:
    src = memoryview(src).cast("B")
    def by(path: str, off: int, n: int) -> None:
      if path == "sram": return self.staging.copyin_queued(buf.va + offset + off, src[off:off + n], self._gpu_queue)
      self._synchronize()          # earlier work may still read or write the buffer
      self.session.write(buf.va + offset + off, src[off:off + n])
    with self._open_lock(): self._by_path("in", len(src), by)

  def _copyout(self, buf, size: int, offset: int) -> bytes:
    def by(path: str, off: int, n: int) -> bytes:
      if path == "sram": return self.staging.copyout_queued(buf.va + offset + off, n, self._gpu_queue_out)
      self._synchronize()
      return self.session.read(buf.va + offset + off, n)
    with self._open_lock(): return b"".join(self._by_path("out", size, by))

  def _by_path(self, direction: str, size: int, by) -> list:
    """copy_path "sram" or "bar": that path; "auto": the one measured cheaper (usbcopypath.py)."""
    if self.copy_path == "auto": return self.copy_paths.run(direction, size, by)
    if self.copy_path not in ("sram", "bar"):
      raise DeviceError(f"{self.label}: copy_path {self.copy_path!r} is none of 'auto', 'sram', 'bar'")
    return [by(self.copy_path, 0, size)]

  def _alloc(self, nbytes: int, host: bool = False, cpu_access: bool = False):
    from ...hcq import Buffer
    with self._open_lock(): mem = self.session.alloc(nbytes, kind="vram")
    return Buffer(self, mem.va, nbytes, handle=mem, cpu_view=None, kind="device")   # no memory the CPU maps here


def open_am_usb(os, index: int, config, label: str | None = None) -> USBAMDDevice:
  """hcq.open("USB+AMD:N"): boot the GPU behind USB bridge N and stand the runtime device on it."""
  return USBAMDDevice(AMUSBSession(os, index, config, label), os, config)
