"""One mock NV GPU: its properties and class list, the memory mapped to it, its GPFIFO channels and the pushbuffer
method interpreter, compute launches decoded from QMDs and run by the PTX interpreter (mockgpu/nv/ptx).

Channels (NVIDIA open-gpu-doc manuals/ampere/ga100/dev_ram.ref.txt: GP_ENTRY and RAMUSERD; open-gpu-kernel-modules clc86f.h): a GPFIFO ring of 8-byte entries (pushbuffer address in
bits 39:2, length in dwords in bits 62:42) and USERD right after it (GPGet at +0x88, GPPut at +0x8C). The driver
writes entries and GPPut, then its work-submit token to the usermode page at +0x90 (the doorbell). The usermode
page of the mock is host memory (the mock has no way to see an mmap'd store): the GPU looks at the doorbell word
whenever the MockOS gives it a chance (a memory barrier, which a driver issues after its doorbell store to push it
out of the write-combining buffer; sleep(); a blocked wait), and the worker thread polls it in threaded mode. A
token seen is consumed (the word is set back to NO_TOKEN).

Pushbuffer methods: header bits 11:0 = method / 4, 15:13 subchannel, 28:16 count, 31:29 opcode (1 INC, 3 NON_INC,
4 IMMD, 5 ONE_INC). Methods below 0x100 are the host class's (every subchannel): SET_OBJECT (0x0) binds an engine
object of the channel to the subchannel, SEM_ADDR/PAYLOAD/EXECUTE (0x5c-0x6c) release (with a timestamp) and
acquire semaphores, NON_STALL_INTERRUPT and WFI. Engine methods: compute SEND_PCAS_A (0x2b4) + SEND_SIGNALING_PCAS2_B
(0x2c0) launch the QMD at PCAS_A << 8; copy OFFSET_IN/OUT (0x400-0x40c), LINE_LENGTH_IN (0x418), LAUNCH_DMA (0x300).

An acquire that is not satisfied leaves the channel at its header (blocked); later polls retry it. A fault (a bad
address in a method, a kernel's access outside mapped memory) stops the channel and is written to its error notifier
(an NvNotification: status 0xFFFF, info32 the robust-channel error; the faulting address, which hardware reports
through the debugger object's MMU fault info, in the second record's timestamp), where the driver looks for it.
A kernel runs to its end in one go (inside the doorbell's tick in synchronous mode, on the worker thread in threaded
mode): the PTX interpreter has no resumable slices (AMD's emulator has). It polls a stop callback about every 20 ms,
which ends the kernel when its channel goes away or the GPU closes (close() never waits for an endless kernel), and,
in synchronous mode, once the kernel ran past the configured timeout (the host thread is the one running it: the
channel stops with Xid 8, which the driver reports at its wait).
"""
from __future__ import annotations

import ctypes
import threading
from array import array
import time
import zlib
from operator import itemgetter
from dataclasses import dataclass, field

from ...errors import GPUFault, HCQError, QueueError
from ...drivers.system.interrupts import held as held_interrupt
from ...autogen.nv import clc7b5 as _clc7b5
from ..peer import PeerWindows
from . import abi, qmd, sm as SM

NO_TOKEN = 0xFFFFFFFF
DOORBELL_OFFSET = 0x90                  # NOTIFY_CHANNEL_PENDING of the usermode class
USERD_GP_GET, USERD_GP_PUT = 0x88, 0x8C
# nverror.h (the Xid numbers): a channel stopped by a time limit, an engine exception, an MMU fault
ROBUST_CHANNEL_TIMEOUT, ROBUST_CHANNEL_GR_EXCEPTION, ROBUST_CHANNEL_MMU_FAULT = 8, 13, 31
PTX_ENTRY_MAGIC = b"PTXENTRY"           # the mock GPU's "machine code": see PTX_ENTRY below
# At a program address the mock GPU finds: magic (8 bytes), u64 address of the PTX module's text, u32 its length,
# u32 the kernel name's length, then the name; or SASS whose 16 bytes before hold the magic and the address of that
# record (a code image that carries the PTX beside the SASS, as CUDA fatbins do: the mock runs the PTX).
PTX_ENTRY_HEADER = 24
# the CUDA parameter bank: where the explicit kernel parameters start in constant buffer 0 (per SM major version)
PARAM_BASE = {7: 0x160, 8: 0x160, 9: 0x210, 10: 0x380, 12: 0x380}

HOST_SEM_ADDR_LO, HOST_SEM_ADDR_HI, HOST_SEM_PAYLOAD_LO, HOST_SEM_PAYLOAD_HI, HOST_SEM_EXECUTE = 0x5C, 0x60, 0x64, 0x68, 0x6C
SEM_OP_ACQUIRE, SEM_OP_RELEASE, SEM_OP_ACQ_STRICT_GEQ, SEM_OP_ACQ_CIRC_GEQ, SEM_OP_ACQ_AND, SEM_OP_ACQ_NOR = range(6)
SEM_PAYLOAD_64, SEM_RELEASE_TIMESTAMP = 1 << 24, 1 << 25
COMPUTE_SEND_PCAS_A, COMPUTE_SEND_SIGNALING_PCAS2_B = 0x2B4, 0x2C0
COPY_LAUNCH_DMA, COPY_OFFSET_IN_UPPER, COPY_LINE_LENGTH_IN = 0x300, 0x400, 0x418
COPY_SET_SEMAPHORE_A = 0x240
# LAUNCH_DMA fields (autogen/nv/clc7b5.py, NVIDIA's clc7b5.h): FLUSH_ENABLE, SEMAPHORE_PAYLOAD_SIZE
COPY_FLUSH_ENABLE = 1 << _clc7b5.RANGES["NVC7B5_LAUNCH_DMA_FLUSH_ENABLE"][1]
COPY_PAYLOAD_SIZE_BIT = _clc7b5.RANGES["NVC7B5_LAUNCH_DMA_SEMAPHORE_PAYLOAD_SIZE"][1]

# the state keys of SEM_ADDR_LO/HI and SEM_PAYLOAD_LO/HI on each subchannel
_SEM_KEYS = tuple(tuple((subc, m) for m in (HOST_SEM_ADDR_LO, HOST_SEM_ADDR_HI, HOST_SEM_PAYLOAD_LO, HOST_SEM_PAYLOAD_HI))
                  for subc in range(8))
HOST_METHOD_NAMES = {0x0: "SET_OBJECT", 0x20: "NON_STALL_INTERRUPT", 0x5C: "SEM_ADDR_LO", 0x60: "SEM_ADDR_HI",
                     0x64: "SEM_PAYLOAD_LO", 0x68: "SEM_PAYLOAD_HI", 0x6C: "SEM_EXECUTE", 0x78: "WFI"}


@dataclass
class NVGPUProperties:
  """What the RM reports about a GPU: name, chip, PCI id, SM version, GR layout, memory, driver, class list."""
  name: str
  chip: str
  device_id: int
  sm_version: int                  # 0x900 = sm_90
  gpcs: int
  tpc_per_gpc: int
  sm_per_tpc: int
  max_warps_per_sm: int
  vram_size: int
  driver_version: str
  classes: tuple = field(default_factory=tuple)

  @property
  def compute_class(self) -> int:
    return next(c for c in self.classes if c in (abi.BLACKWELL_COMPUTE_A, abi.HOPPER_COMPUTE_A, abi.ADA_COMPUTE_A,
                                                 abi.AMPERE_COMPUTE_B))


_COMMON = (abi.NV01_ROOT_CLIENT, abi.NV01_DEVICE_0, abi.NV20_SUBDEVICE_0, abi.NV01_MEMORY_SYSTEM, abi.NV1_MEMORY_USER,
           abi.NV01_MEMORY_VIRTUAL, abi.NV01_MEMORY_SYSTEM_OS_DESCRIPTOR, abi.FERMI_VASPACE_A,
           abi.KEPLER_CHANNEL_GROUP_A, abi.FERMI_CONTEXT_SHARE_A, abi.TURING_USERMODE_A, abi.AMPERE_USERMODE_A,
           abi.AMPERE_CHANNEL_GPFIFO_A, abi.GT200_DEBUGGER)
# g_gpu_class_list.c: GH100 lists Hopper's compute/copy/usermode/GPFIFO classes and none of Ampere's or Ada's compute
# and copy classes (section 1.8); AD102 lists Ada's compute class and Ampere's copy class
GPUS = {
  "H200": NVGPUProperties("NVIDIA H200", "GH100", 0x2335, 0x900, 8, 9, 2, 64, 141 << 30, "580.95.05",
                          _COMMON + (abi.HOPPER_USERMODE_A, abi.HOPPER_CHANNEL_GPFIFO_A, abi.HOPPER_COMPUTE_A,
                                     abi.HOPPER_DMA_COPY_A)),
  # a Blackwell (GB100) for QMD V05_00: BLACKWELL_COMPUTE_A / DMA_COPY_A / CHANNEL_GPFIFO_A / USERMODE_A
  "B200": NVGPUProperties("NVIDIA B200", "GB100", 0x2901, 0xA00, 8, 9, 2, 64, 180 << 30, "580.95.05",
                          _COMMON + (abi.HOPPER_USERMODE_A, abi.BLACKWELL_USERMODE_A, abi.BLACKWELL_CHANNEL_GPFIFO_A,
                                     abi.BLACKWELL_COMPUTE_A, abi.BLACKWELL_DMA_COPY_A)),
  "AD102": NVGPUProperties("NVIDIA GeForce RTX 4090", "AD102", 0x2684, 0x809, 11, 6, 2, 48, 24 << 30, "580.95.05",
                           _COMMON + (abi.ADA_COMPUTE_A, abi.AMPERE_DMA_COPY_B)),
}
QMD_MAJOR = {abi.AMPERE_COMPUTE_B: 3, abi.ADA_COMPUTE_A: 3, abi.HOPPER_COMPUTE_A: 4, abi.BLACKWELL_COMPUTE_A: 5}


SEQUENCE_CACHE_ENTRIES = 64     # decoded method runs kept per GPU, by entry length (GPU._sequence)


def _kind(method: int) -> int:
  """How GPU._run_sequence applies a method (see GPU._sequence)."""
  if method < 0x100: return 1 if method in (0x0, HOST_SEM_EXECUTE) else 0
  return 3 if method in (COMPUTE_SEND_SIGNALING_PCAS2_B, COPY_LAUNCH_DMA) else 2


def _plan(ops) -> tuple:
  """A decoded method run (GPU._sequence's methods) as steps (keys, values, subchannels, methods, effect): the
  methods up to and including the next one with an effect (kind 1 or 3). Those before it only store their value
  (kinds 0 and 2): keys and values (a getter of their data dwords) store them at once, valid when every engine
  subchannel in `subchannels` holds an object; keys is None where a method's data is IMMD's (in the header, not at a
  position), and `methods` (the same methods) are then stored one by one, as they are when a subchannel is
  unbound. effect: the method with an effect (applied after the stores), None for the run's tail."""
  steps, run = [], []
  for op in ops:
    if op[2] in (1, 3):
      steps.append(_step(run, op))
      run = []
    else: run.append(op)
  if run: steps.append(_step(run, None))
  return tuple(steps)


def _step(run: list, effect) -> tuple:
  subcs = frozenset(key[0] for key, _, kind, _, _ in run if kind == 2)
  if not run: return (), _no_values, subcs, (), effect
  if any(immd is not None for *_, immd in run): return None, None, subcs, tuple(run), effect
  positions = [pos for _, pos, _, _, _ in run]
  # itemgetter of one position returns the value itself, not a tuple: ask for it twice (zip stops at the one key)
  values = itemgetter(*positions) if len(positions) > 1 else itemgetter(positions[0], positions[0])
  return tuple(key for key, *_ in run), values, subcs, tuple(run), effect


def _no_values(words) -> tuple: return ()


class Channel:
  """A GPFIFO channel: ring, USERD, error notifier, the engine objects bound to its subchannels, the position in
  the pushbuffer it is at."""

  def __init__(self, gpu, handle: int, token: int, gpfifo_va: int, entries: int, userd_va: int, notifier_va: int,
               objects: dict):
    self.gpu, self.handle, self.token = gpu, handle, token
    self.gpfifo_va, self.entries, self.userd_va, self.notifier_va = gpfifo_va, entries, userd_va, notifier_va
    self.objects = objects           # engine object class -> handle (filled as they are allocated under the channel)
    self.subchannels: dict[int, int] = {}
    self.state: dict[tuple[int, int], int] = {}   # (subchannel, method) -> last value
    self.gp_get = 0
    self.current: list | None = None             # [pushbuffer address, dwords, position] of the entry being run
    self.pending: list | None = None             # a method header whose data dwords are still to come
    self.error: HCQError | None = None
    self.active = True
    self.blocked_on: str | None = None
    self.name = f"{gpu.name} channel {token}"
    self.cells = None       # (mappings' generation, GPPut word, GPGet word, the ring's entries) once checked mapped
    self.pb_range = (-1, 0, 0, None)   # the mapped range of the last entry's words (GPU._kept_range)

  @property
  def has_work(self) -> bool:
    if not self.active or self.error is not None: return False
    return self.current is not None or self.gpu.read32(self.userd_va + USERD_GP_PUT) % self.entries != self.gp_get


class MockNVGPU:
  """The GPU of one /dev/nvidiaN: memory ranges (GPU VA == host VA), channels, the usermode doorbell page, and the
  MockOS engine interface (poll, blocked, may_progress) or a worker thread (config.mock_threaded)."""

  def __init__(self, os, index: int, props: NVGPUProperties):
    from ..gpumem import GPUMemory      # the checked GPU address space the PTX interpreter reads through
    self.os, self.index, self.props = os, index, props
    self.name = f"mock {props.chip} #{index}"
    self.uuid = bytes([0x4E, 0x56, index]) + bytes(13)
    self.ranges = GPUMemory()
    # another PCI function's BAR pages in this GPU's VA space (an OS descriptor of I/O memory mapped by RM, rm.py): a
    # semaphore release there is a posted write of its width to that function, an acquire a read (mockgpu/peer.py)
    self.peers = PeerWindows()
    self.lock = threading.RLock()
    self.channels: list[Channel] = []
    self.threaded = bool(os.config.mock_threaded)
    self.timeout_s = float(os.config.timeout_s)
    self._stop = False
    self._modules: dict = {}          # (text address, length, crc) -> parsed PTX module
    self._programs: dict = {}         # program address -> kernel, while the mappings stay the same (see _kernel)
    self._launches: dict = {}         # decoded QMDs (see _launch)
    self._qmd_range = (-1, 0, 0, None)   # the mapped range of the last QMD (_kept_range)
    self._last_qmd = None             # (the last QMD's key in _launches, its decoded launch, its bytes)
    self._sem_range = (-1, 0, 0, None)   # the same for the last 64-bit semaphore release of a channel's host class
    self._seen_generation, self._seen = -1, []
    self._sequences: dict = {}        # entry length -> decoded method run (see _sequence)
    self._blocked: set = set()        # channels waiting on a semaphore acquire
    self.stats = {"launches": 0, "copies": 0, "thread_instructions": 0}
    self._clock_base = time.monotonic_ns()
    self.doorbell_cell = None         # ctypes u32 of the usermode page's doorbell word, while mapped
    self._doorbell_lock = threading.Lock()   # the page may be unmapped while the worker looks at the cell
    self.usermode_va = None
    self._worker = None
    if self.threaded:
      self._worker = threading.Thread(target=self._run_worker, name=f"{self.name} worker", daemon=True)
      self._worker.start()
    else: os.register_engine(self)

  # ---- memory (checked: an access outside the mapped ranges is a GPU fault with its address)
  def check(self, addr: int, size: int, what: str) -> tuple[int, int]:
    """Refuse (GPUFault naming `what` and the address) an access outside the mapped ranges; returns the mapped range
    (start, end) that holds it, which a caller may keep for as long as the mappings' generation stays the same."""
    # the ranges that satisfied recent checks, for as long as the GPU's mappings are the same (the hot path: the
    # same ring, USERD, pushbuffer and signal pages every launch)
    ranges = self.ranges
    if self._seen_generation != ranges.generation:
      self._seen_generation, self._seen = ranges.generation, []
    for rng in self._seen:
      if rng[0] <= addr and addr + size <= rng[1]: return rng
    rng = ranges.range_of(addr)
    if rng is None or addr + size > rng[1]:
      if self.peers.windows: self.peers.refuse_bulk(addr, size, f"{self.name}: {what}")
      raise GPUFault(f"{self.name}: {what} at {addr:#x}", address=addr, kind="page fault")
    if len(self._seen) >= 8: self._seen.pop(0)
    self._seen.append(rng)
    return rng

  def _kept_range(self, addr: int, size: int, what: str, fmt: str) -> tuple:
    """check(), then (the mappings' generation, start, end, a view of the mapped range in `fmt` items or None where
    its start is not 8-byte aligned): what a hot path keeps and uses while the generation is the same (a range
    unmapped since changes the generation)."""
    start, end = self.check(addr, size, what)
    view = memoryview((ctypes.c_ubyte * (end - start)).from_address(start)).cast("B").cast(fmt) if start % 8 == 0 else None
    return self.ranges.generation, start, end, view

  def read32(self, addr: int, what: str = "read") -> int:
    if self.peers.windows and (w := self.peers.find(addr, 4)) is not None: return w.read(addr, 4, f"{self.name}: {what}")
    self.check(addr, 4, what)
    return ctypes.c_uint32.from_address(addr).value

  def read64(self, addr: int, what: str = "read") -> int:
    if self.peers.windows and (w := self.peers.find(addr, 8)) is not None: return w.read(addr, 8, f"{self.name}: {what}")
    self.check(addr, 8, what)
    return ctypes.c_uint64.from_address(addr).value

  def write32(self, addr: int, value: int, what: str = "write") -> None:
    if self.peers.windows and (w := self.peers.find(addr, 4)) is not None: return w.write(addr, 4, value, f"{self.name}: {what}")
    self.check(addr, 4, what)
    ctypes.c_uint32.from_address(addr).value = value & 0xFFFFFFFF

  def write64(self, addr: int, value: int, what: str = "write") -> None:
    if self.peers.windows and (w := self.peers.find(addr, 8)) is not None: return w.write(addr, 8, value, f"{self.name}: {what}")
    self.check(addr, 8, what)
    ctypes.c_uint64.from_address(addr).value = value & 0xFFFFFFFFFFFFFFFF

  def read_bytes(self, addr: int, size: int, what: str = "read") -> bytes:
    self.check(addr, size, what)
    return ctypes.string_at(addr, size)

  def _mapped(self, addr: int, size: int) -> bool:
    rng = self.ranges.range_of(addr)
    return rng is not None and addr + size <= rng[1]

  def map_range(self, va: int, size: int) -> None:
    with self.lock: self.ranges.add_range(va, size)

  def map_peer(self, va: int, size: int, mmio, offset: int, name: str) -> None:
    """Another PCI function's BAR window (an MMIOView) at va: the host's semaphore stores there reach its model."""
    with self.lock:
      rng = self.ranges.range_of(va)
      if rng is not None or self.ranges.range_of(va + size - 1) is not None:
        raise ValueError(f"peer window {va:#x}+{size:#x} overlaps GPU memory")
      self.peers.add(va, size, mmio, offset, name)

  def unmap_peer(self, va: int) -> None:
    with self.lock: self.peers.remove(va)

  def unmap_range(self, va: int) -> None:
    with self.lock: self.ranges.remove_range(va)

  def clock_ns(self) -> int: return time.monotonic_ns() - self._clock_base

  # ---- the usermode page and channels
  def set_usermode(self, va: int) -> None:
    """The usermode object was mapped to the CPU at va (host memory): the doorbell word starts empty."""
    with self._doorbell_lock:
      self.usermode_va = va
      self.doorbell_cell = ctypes.c_uint32.from_address(va + DOORBELL_OFFSET)
      self.doorbell_cell.value = NO_TOKEN

  def host_memory_freed(self, addr: int, size: int) -> None:
    """Host memory [addr, addr+size) is being unmapped: if the usermode page is in it, the doorbell is gone (the
    worker must not read the cell after the munmap)."""
    with self._doorbell_lock:
      if self.usermode_va is not None and addr <= self.usermode_va < addr + size:
        self.usermode_va = self.doorbell_cell = None

  def _rung(self, consume: bool) -> bool:
    """Whether the doorbell holds a token (taken when consume)."""
    with self._doorbell_lock:
      cell = self.doorbell_cell
      rung = cell is not None and cell.value != NO_TOKEN
      if rung and consume: cell.value = NO_TOKEN
      return rung

  def add_channel(self, ch: Channel) -> None:
    with self.lock: self.channels.append(ch)

  def remove_channel(self, ch: Channel) -> None:
    ch.active = False        # first, without the lock: a kernel the worker runs under it sees it and stops
    with self.lock:
      ch.current = None
      self._set_blocked(ch, None)
      if ch in self.channels: self.channels.remove(ch)

  # ---- the engine interface of MockOS (synchronous mode)
  @property
  def may_progress(self) -> bool:
    if self._blocked: return True
    with self._doorbell_lock:         # _rung(consume=False), inline: every memory barrier of the host asks
      cell = self.doorbell_cell
      return cell is not None and cell.value != NO_TOKEN

  @property
  def blocked(self) -> bool: return bool(self._blocked)

  def _set_blocked(self, ch: Channel, what: str | None) -> None:
    """A channel waits on memory (what: on which), or no longer; the set is what may_progress looks at."""
    ch.blocked_on = what
    if what is None: self._blocked.discard(ch)
    else: self._blocked.add(ch)

  def poll(self) -> bool:
    with self._doorbell_lock:          # _rung(consume=True), inline: the token is consumed; every channel with work
      cell = self.doorbell_cell        # is looked at (tokens may have merged)
      rung = cell is not None and cell.value != NO_TOKEN
      if rung: cell.value = NO_TOKEN
    if not rung and not self._blocked: return False
    progress = False
    with self.lock:
      gen = self.ranges.generation
      for ch in list(self.channels):
        if not ch.active or ch.error is not None: continue
        # _run's first test, inline: a channel whose GPPut (checked mapped, see _cells) is at GPGet has nothing new
        # (the copy channel on a launch's doorbell)
        cells = ch.cells
        if ch.current is None and cells is not None and cells[0] == gen and cells[1].value == ch.gp_get: continue
        if self._run_channel(ch): progress = True
    return progress or rung

  def _run_worker(self) -> None:
    # the doorbell is a word of host memory (see the module docstring): the worker looks at it, more and more
    # rarely while nothing happens (50 us, doubling to 1 ms), at once again after any progress
    pause = 50e-6
    while not self._stop:
      if self.poll(): pause = 50e-6
      else:
        time.sleep(pause)
        pause = min(pause * 2, 1e-3)

  def close(self) -> None:
    self._stop = True        # a running kernel's stop callback sees it
    if self._worker is not None:
      self._worker.join(timeout=5)
      self._worker = None
    else: self.os.unregister_engine(self)
    with self.lock:
      for ch in self.channels: ch.active = False

  # ---- the GPFIFO interpreter
  def _run_channel(self, ch: Channel) -> bool:
    try: return self._run(ch)    # (the faults of a channel's methods stop the channel)
    except (GPUFault, QueueError) as e: self._fail(ch, e)
    except HCQError as e:          # PTX the SM cannot run (the interpreter's PTXError): an engine exception
      self._fail(ch, _diagnosed(ch, str(e), ILLEGAL_INSTRUCTION))
    except Exception as e:         # a bug of the model stops this channel only, named
      self._fail(ch, QueueError(ch.name, f"the mock's channel model failed ({type(e).__name__}: {e})"))
    return True

  @property
  def pci_bus(self) -> str:
    """domain:bus:device as the mock RM reports this GPU's PCI address (mockgpu/nv/rm.py: bus 0x40 + index)."""
    return f"0000:{0x40 + self.index:02x}:00"

  def _fail(self, ch: Channel, e: HCQError) -> None:
    """Stop the channel: its error notifier gets the robust-channel error (Xid) as nvidia.ko writes it
    (NvNotification: timeStamp, info32 = the Xid, info16, status 0xFFFF; the 16 bytes after it are the next record,
    whose first 8 bytes are a timestamp too), and the kernel log an "NVRM: Xid" line as nvidia.ko prints one, with
    the mock's diagnosis of the cause (marked as the mock's) where hardware would name its exception."""
    ch.error, ch.current, ch.pending = e, None, None
    self._set_blocked(ch, None)
    address = getattr(e, "address", None)
    code = getattr(e, "xid", None)
    if code is None: code = ROBUST_CHANNEL_MMU_FAULT if address is not None else ROBUST_CHANNEL_GR_EXCEPTION
    now = self.clock_ns()
    try:
      self.write64(ch.notifier_va, now, "error notifier")
      self.write32(ch.notifier_va + 8, code)
      self.write32(ch.notifier_va + 12, 0xFFFF << 16)       # info16 0, status 0xFFFF: an error
      self.write64(ch.notifier_va + 16, now, "error notifier")
    except GPUFault: pass
    ch.last_error = e
    printk = getattr(self.os, "printk", None)
    if printk is not None: printk(xid_line(self.pci_bus, code, ch.token, e, address, getattr(self.os, "pid", 0)))

  def _cells(self, ch: Channel):
    """The channel's GPPut and GPGet words and GPFIFO entries as ctypes objects, checked mapped once for as long as
    the GPU's mappings stay the same (the lock is held from the check to the use); None while they are not all
    mapped (then each access is checked, and the one that is not faults naming its address)."""
    gen = self.ranges.generation
    cells = ch.cells
    if cells is not None and cells[0] == gen: return cells
    ch.cells = None
    try:
      self.check(ch.userd_va + USERD_GP_PUT, 4, "USERD GPPut")
      self.check(ch.userd_va + USERD_GP_GET, 4, "USERD GPGet")
      self.check(ch.gpfifo_va, 8 * ch.entries, "GPFIFO")
    except GPUFault: return None
    ch.cells = (gen, ctypes.c_uint32.from_address(ch.userd_va + USERD_GP_PUT),
                ctypes.c_uint32.from_address(ch.userd_va + USERD_GP_GET),
                (ctypes.c_uint64 * ch.entries).from_address(ch.gpfifo_va))
    return ch.cells

  def _run(self, ch: Channel) -> bool:
    cells, ranges = ch.cells, self.ranges
    if ch.current is None and cells is not None and cells[0] == ranges.generation and cells[1].value == ch.gp_get:
      return False   # nothing new (the copy channel on a launch's doorbell): GPPut, checked mapped, is at GPGet
    progress = False
    put = None       # GPPut as read when this run began: entries published later come with their own doorbell
    if cells is None or cells[0] != ranges.generation: cells = self._cells(ch)
    while ch.active and ch.error is None:
      cur = ch.current
      if cur is None:
        if cells is not None and cells[0] != ranges.generation: cells = self._cells(ch)   # (a launch mapped
        if put is None:                                                                  # its module's globals)
          put = cells[1].value if cells is not None else self.read32(ch.userd_va + USERD_GP_PUT, "USERD GPPut")
          if put >= ch.entries: raise QueueError(ch.name, f"GPPut {put} is outside the ring of {ch.entries} entries")
        if put == ch.gp_get: return progress
        entry = cells[3][ch.gp_get] if cells is not None else self.read64(ch.gpfifo_va + 8 * ch.gp_get, "GPFIFO entry")
        cur = ch.current = [entry & 0xFFFFFFFFFC, (entry >> 42) & 0x1FFFFF, 0]
      if cur[1] and not self._run_pushbuffer(ch, cur): return progress
      ch.current = None
      ch.gp_get = (ch.gp_get + 1) % ch.entries
      if cells is not None and cells[0] == ranges.generation: cells[2].value = ch.gp_get
      else: self.write32(ch.userd_va + USERD_GP_GET, ch.gp_get, "USERD GPGet")
      progress = True
    return progress

  def _run_pushbuffer(self, ch: Channel, cur: list | None = None) -> bool:
    """Run the current entry (cur: ch.current) from its position; False when an acquire blocks (the position stays
    at the blocked dword). The entry's words are fetched as the pusher fetches them: check(), against the range that
    held this channel's last entry first (its pushbuffer ring, while the mappings are the same), then a slice of the
    kept u32 view of that range (else a copy). A whole entry from its start whose header sequence was seen before
    runs from the kept decode (_sequence, _run_sequence: a launch's pushbuffer differs from the last one's only in
    data dwords; every method is still applied); others go the general way (_run_methods)."""
    if cur is None: cur = ch.current
    base, length = cur[0], cur[1]
    if length == 0: return True
    last = ch.pb_range
    if last[0] != self.ranges.generation or not (last[1] <= base and base + 4 * length <= last[2]):
      ch.pb_range = last = self._kept_range(base, 4 * length, "pushbuffer", "I")
    if last[3] is not None:
      first = (base - last[1]) >> 2
      words = last[3][first:first + length]
    else: words = array("I", ctypes.string_at(base, 4 * length))
    if cur[2] == 0 and ch.pending is None:
      seq = self._sequences.get(length)
      if seq is None or seq[0](words) != seq[1]: seq = self._sequence(words, length)
      if seq is not None: return self._run_sequence(ch, cur, words, seq[2])
    return self._run_methods(ch, words)

  def _run_methods(self, ch: Channel, words) -> bool:
    """The general pushbuffer loop over the current entry's words from its position. GPFIFO entries are pieces of
    one command stream (envytools, "DMA submission to FIFOs", IB mode: the entries' pushbuffer areas "will be
    stitched together to create the command stream"; the pusher's method, subchannel and count are state that
    outlives an entry): a method header's data may continue in the next entry, which is what a driver's ring
    produces when its words wrap."""
    cur = ch.current
    base, length, pos = cur[0], cur[1], cur[2]
    method_of = self._method
    while pos < length:
      pend = ch.pending
      if pend is not None:             # data dwords of a header read before: [op, subc, method, left, index]
        op, subc, method, left, i = pend
        m = method + 4 * i if op == 1 else method if op == 3 else method + (4 if i else 0)
        if not method_of(ch, subc, m, words[pos]):
          cur[2] = pos
          return False
        pos += 1
        if left == 1: ch.pending = None
        else: ch.pending = [op, subc, method, left - 1, i + 1]
        continue
      header = words[pos]
      op, count, subc, method = header >> 29, (header >> 16) & 0x1FFF, (header >> 13) & 7, (header & 0xFFF) << 2
      if op == 4:                      # IMMD: the count field is the data
        if not method_of(ch, subc, method, count):
          cur[2] = pos
          return False
        pos += 1
        continue
      if op not in (1, 3, 5):
        raise QueueError(ch.name, f"pushbuffer header {header:#010x} at {base + 4 * pos:#x}: opcode {op} is not modelled")
      pos += 1
      if not count: continue
      if pos + count > length:         # the data continues in the next entry
        ch.pending = [op, subc, method, count, 0]
        continue
      for i in range(count):           # the whole method run is in this entry (the common case)
        m = method + 4 * i if op == 1 else method if op == 3 else method + (4 if i else 0)
        if not method_of(ch, subc, m, words[pos]):
          ch.pending = [op, subc, method, count - i, i]   # this dword again when the acquire is retried
          cur[2] = pos
          return False
        pos += 1
    cur[2] = pos
    return True

  def _sequence(self, words, length: int):
    """The entry's method run decoded from its headers: (a getter of the header dwords, their values, the run's plan
    (_plan)); None when the entry is not one self-contained run of IMMD/INC/NON_INC/ONE methods (data continuing
    into the next entry, an opcode that is not modelled): those go the general way, which raises the same errors.
    Each method is (state key, data position, kind, what pending holds when that method blocks, IMMD's data or
    None); kind 0: a host method that only stores its value; 1: a host method with an effect (SET_OBJECT,
    SEM_EXECUTE); 2: an engine method without an effect (its subchannel must hold an object); 3: an engine method
    that may trigger work (the launch, LAUNCH_DMA)."""
    heads, ops, pos = [], [], 0
    while pos < length:
      header = words[pos]
      op, count, subc, method = header >> 29, (header >> 16) & 0x1FFF, (header >> 13) & 7, (header & 0xFFF) << 2
      heads.append(pos)
      if op == 4:
        ops.append(((subc, method), pos, _kind(method), None, count))   # IMMD: the count field is the data
        pos += 1
        continue
      if op not in (1, 3, 5): return None
      pos += 1
      if pos + count > length: return None
      for i in range(count):
        m = method + 4 * i if op == 1 else method if op == 3 else method + (4 if i else 0)
        ops.append(((subc, m), pos, _kind(m), (op, subc, method, count - i, i), None))
        pos += 1
    if len(self._sequences) >= SEQUENCE_CACHE_ENTRIES: self._sequences.clear()
    getter = itemgetter(*heads)
    seq = self._sequences[length] = (getter, getter(words), _plan(ops))
    return seq

  def _run_sequence(self, ch: Channel, cur: list, words, plan) -> bool:
    """A decoded method run (_sequence, _plan) on the entry's words: each method stored and applied as _method
    does, in order; a blocked acquire leaves the position and pending header as the general loop leaves them.
    A step's methods without an effect are stored in one dict update when every engine subchannel among them holds
    an object (else method by method, so that the one without names itself); then the step's effect, if any."""
    state, subchannels = ch.state, ch.subchannels
    for keys, values, subcs, ops, effect in plan:
      if keys is not None and subchannels.keys() >= subcs: state.update(zip(keys, values(words)))
      elif ops:
        for key, pos, kind, pend, immd in ops:
          state[key] = words[pos] if immd is None else immd
          if kind == 0 or key[0] in subchannels: continue
          self._method(ch, key[0], key[1], state[key])      # raises: the subchannel holds no object
      if effect is None: continue
      key, pos, kind, pend, immd = effect
      value = state[key] = words[pos] if immd is None else immd
      if kind == 3 and key[1] == COMPUTE_SEND_SIGNALING_PCAS2_B and (cls := subchannels.get(key[0])) in QMD_MAJOR:
        # _method's launch, directly: the subchannel holds a compute object
        self._launch(ch, cls, state.get((key[0], COMPUTE_SEND_PCAS_A), 0) << 8)
        continue
      if not (self._host_method(ch, key[0], key[1], value) if kind == 1 else self._method(ch, key[0], key[1], value)):
        ch.pending = None if pend is None else list(pend)
        cur[2] = pos
        return False
    cur[2] = len(words)
    return True

  def _method(self, ch: Channel, subc: int, method: int, value: int) -> bool:
    ch.state[(subc, method)] = value
    if method < 0x100: return self._host_method(ch, subc, method, value)
    cls = ch.subchannels.get(subc)
    if cls is None: raise QueueError(ch.name, f"method {method:#x} on subchannel {subc}, which has no object (SET_OBJECT)")
    if cls in QMD_MAJOR:
      if method == COMPUTE_SEND_SIGNALING_PCAS2_B: self._launch(ch, cls, ch.state.get((subc, COMPUTE_SEND_PCAS_A), 0) << 8)
    elif method == COPY_LAUNCH_DMA: self._copy(ch, subc, value)
    return True

  def _host_method(self, ch: Channel, subc: int, method: int, value: int) -> bool:
    if method == 0x0:                  # SET_OBJECT: an engine object allocated under this channel
      if value not in ch.objects:
        raise QueueError(ch.name, f"SET_OBJECT {value:#x} on subchannel {subc}: no object of that class on the channel")
      ch.subchannels[subc] = value
      return True
    if method != HOST_SEM_EXECUTE: return True
    get = ch.state.get
    k_addr_lo, k_addr_hi, k_payload_lo, k_payload_hi = _SEM_KEYS[subc]
    addr = get(k_addr_lo, 0) | get(k_addr_hi, 0) << 32
    payload = get(k_payload_lo, 0) | get(k_payload_hi, 0) << 32
    wide = value & SEM_PAYLOAD_64
    op = value & 7
    # dev_pbdma.ref.txt SEM_EXECUTE: a 64-bit payload needs an 8-byte aligned address, a release with a timestamp a
    # 16-byte aligned one; else Host raises NV_PBDMA_INTR_0_SEMAPHORE
    need = 16 if op == SEM_OP_RELEASE and value & SEM_RELEASE_TIMESTAMP else 8 if wide else 4
    if addr % need:
      raise QueueError(ch.name, f"SEM_EXECUTE {value:#x} at semaphore address {addr:#x}: not {need}-byte aligned "
                                f"(NV_PBDMA_INTR_0_SEMAPHORE)")
    if op == SEM_OP_RELEASE:
      last = self._sem_range
      if wide and not self.peers.windows and last[0] == self.ranges.generation and last[1] <= addr and addr + 8 <= last[2]:
        # write64() without its checks: no peer windows, and the range that held the last release holds this one
        # (the address is 8-byte aligned, checked above: an index of the range's u64 view)
        if last[3] is not None: last[3][(addr - last[1]) >> 3] = payload
        else: ctypes.c_uint64.from_address(addr).value = payload
      elif wide:
        self.write64(addr, payload, "semaphore release")
        if not self.peers.windows: self._sem_range = self._kept_range(addr, 8, "semaphore release", "Q")
      else: self.write32(addr, payload, "semaphore release")
      if value & SEM_RELEASE_TIMESTAMP: self.write64(addr + 8, self.clock_ns(), "semaphore timestamp")
      if ch.blocked_on is not None: self._set_blocked(ch, None)
      return True
    cur = self.read64(addr, "semaphore acquire") if wide else self.read32(addr, "semaphore acquire")
    if not wide: payload &= 0xFFFFFFFF
    mask = (1 << (64 if wide else 32)) - 1
    if op == SEM_OP_ACQUIRE: done = cur == payload
    elif op == SEM_OP_ACQ_STRICT_GEQ: done = cur >= payload
    elif op == SEM_OP_ACQ_CIRC_GEQ: done = ((cur - payload) & mask) < (1 << (63 if wide else 31))
    elif op == SEM_OP_ACQ_AND: done = (cur & payload) != 0
    elif op == SEM_OP_ACQ_NOR: done = (~(cur | payload) & mask) != 0
    else: raise QueueError(ch.name, f"SEM_EXECUTE {value:#x}: operation {op} is not modelled")
    if not done: self._set_blocked(ch, f"semaphore acquire at {addr:#x} for {payload:#x} (holds {cur:#x})")
    elif ch.blocked_on is not None: self._set_blocked(ch, None)
    return done

  # ---- copy engine
  def _copy(self, ch: Channel, subc: int, flags: int) -> None:
    get = ch.state.get
    if flags & 3:                      # a data transfer (NON_PIPELINED or PIPELINED), pitch linear
      src = get((subc, COPY_OFFSET_IN_UPPER), 0) << 32 | get((subc, COPY_OFFSET_IN_UPPER + 4), 0)
      dst = get((subc, COPY_OFFSET_IN_UPPER + 8), 0) << 32 | get((subc, COPY_OFFSET_IN_UPPER + 12), 0)
      n = get((subc, COPY_LINE_LENGTH_IN), 0)
      if flags & (3 << 7) != (3 << 7):
        raise QueueError(ch.name, f"LAUNCH_DMA {flags:#x}: only pitch-linear source and destination are modelled")
      self.check(src, n, "copy source")
      self.check(dst, n, "copy destination")
      ctypes.memmove(dst, src, n)
      self.stats["copies"] += 1
    sem = (flags >> 3) & 3
    if sem:                            # clc7b5.h SEMAPHORE_TYPE: 1 release (one word), 2 release with a timestamp
      addr = get((subc, COPY_SET_SEMAPHORE_A), 0) << 32 | get((subc, COPY_SET_SEMAPHORE_A + 4), 0)
      payload = get((subc, COPY_SET_SEMAPHORE_A + 8), 0)
      wide = flags >> COPY_PAYLOAD_SIZE_BIT & 1        # SEMAPHORE_PAYLOAD_SIZE TWO_WORD: the upper word too
      if wide: payload |= get((subc, COPY_SET_SEMAPHORE_A + 12), 0) << 32
      self.stats["copy_releases"] = self.stats.get("copy_releases", 0) + 1
      if not flags & COPY_FLUSH_ENABLE: self.stats["unflushed_releases"] = self.stats.get("unflushed_releases", 0) + 1
      if sem == 2 or wide: self.write64(addr, payload, "copy semaphore")
      else: self.write32(addr, payload, "copy semaphore")
      if sem == 2: self.write64(addr + 8, self.clock_ns(), "copy semaphore timestamp")

  # ---- compute launches
  def _launch(self, ch: Channel, cls: int, qmd_va: int) -> None:
    major = QMD_MAJOR[cls]
    layout, size = qmd.LAYOUTS[major]
    # check(), against the range that held the last QMD first (the driver's launch data, while the mappings are the
    # same)
    last = self._qmd_range
    if last[0] != self.ranges.generation or not (last[1] <= qmd_va and qmd_va + size <= last[2]):
      self._qmd_range = last = self._kept_range(qmd_va, size, "QMD", "B")
    # decoded launches cached by the QMD's bytes but constant buffer 0's address (the one thing a driver changes
    # from one launch of a kernel to the next), which is read on its own; the address's upper dword holds other
    # fields above its bits (CONSTANT_BUFFER_SIZE_SHIFTED4_0): those are part of the key
    view = last[3]
    raw = view[qmd_va - last[1]:qmd_va - last[1] + size].tobytes() if view is not None else ctypes.string_at(qmd_va, size)
    lo_dw, shift = qmd.CB0_ADDR_DWORD[major]
    key = self._last_qmd
    if key is not None and key[5] == raw and key[0] == major:
      launch = key[4]      # the very bytes of the last QMD (a driver that keeps a shape's launch data)
    # the last QMD's key next, compared in place (startswith/endswith: no slices to make and hash): a kernel
    # launched again with another constant buffer 0
    elif (key is not None and key[0] == major and
          key[2] == int.from_bytes(raw[4 * lo_dw + 4:4 * lo_dw + 8], "little") & ~qmd.CB0_UPPER_MASK[major] and
          raw.startswith(key[1]) and raw.endswith(key[3])):
      launch = key[4]
      self._last_qmd = (*key[:5], raw)
    else:
      hi = int.from_bytes(raw[4 * lo_dw + 4:4 * lo_dw + 8], "little")
      key = (major, raw[:4 * lo_dw], hi & ~qmd.CB0_UPPER_MASK[major], raw[4 * lo_dw + 8:])
      launch = self._launches.get(key)
      if launch is None:
        q = qmd.decode(layout, raw)
        if q["QMD_MAJOR_VERSION"] != major:
          raise QueueError(ch.name, f"QMD at {qmd_va:#x} has major version {q['QMD_MAJOR_VERSION']}; "
                                    f"{abi.class_name(cls)} takes QMD v{major}")
        launch = qmd.launch(major, q)
        if len(self._launches) > 256: self._launches.clear()
        self._launches[key] = launch
      self._last_qmd = (*key, launch, raw)
    if launch.get("does_nothing") == self.ranges.generation:
      # this QMD passed every check below before with the same kernel (the mappings, so the code, are the same)
      # and the kernel is only ret/exit: no thread has anything to do
      self.stats["launches"] += 1
      if launch["releases"]: self._release(launch)
      return
    lo, hi = int.from_bytes(raw[4 * lo_dw:4 * lo_dw + 4], "little"), int.from_bytes(raw[4 * lo_dw + 4:4 * lo_dw + 8], "little")
    cb0 = (lo | (hi & qmd.CB0_UPPER_MASK[major]) << 32) << shift
    grid, block, pc, cb0_size = launch["grid"], launch["block"], launch["pc"], launch["cb0_size"]
    if not launch["cb0_valid"]: raise QueueError(ch.name, f"QMD at {qmd_va:#x}: constant buffer 0 is not valid")
    if 0 in grid or 0 in block:
      self._release(launch)
      return
    if block[0] * block[1] * block[2] > 1024: raise QueueError(ch.name, f"QMD at {qmd_va:#x}: block {block} exceeds 1024 threads")
    # a raw PTX image (tinygrad 0.14's program on a mock interface, ops_nv.NVProgram) has no SASS whose register
    # footprint the QMD could describe: tinygrad leaves REGISTER_COUNT 0 there, so only SASS programs are checked
    if not launch.get("registers_checked") and (launch["registers"] or self._ptx_image(pc) is None):
      try: SM.check_registers(launch["registers"], block)
      except SM.LaunchRefused as e: raise _diagnosed(ch, f"QMD at {qmd_va:#x}: {e}") from None
      # a register count and block that passed stay valid for this decoded QMD (the cache key holds both)
      if launch["registers"]: launch["registers_checked"] = True
    kernel = self._kernel(ch, pc)
    base = PARAM_BASE.get(self.props.sm_version >> 8, 0x160)
    nparam = kernel.param_bytes
    if base + nparam > cb0_size:
      raise QueueError(ch.name, f"QMD at {qmd_va:#x}: constant buffer 0 of {cb0_size} bytes is too small for "
                                f"{nparam} bytes of parameters at {base:#x}")
    params = self.read_bytes(cb0 + base, nparam, "constant buffer 0") if nparam else b""
    if kernel.local_bytes_per_thread:        # the thread's stack lives in the local memory behind the windows
      subc = next((sc for sc, c in ch.subchannels.items() if c == cls), 0)
      try: SM.check_local_memory(ch.state, subc, launch["local_high"], self.props, self._mapped)
      except SM.LaunchRefused as e: raise _diagnosed(ch, f"QMD at {qmd_va:#x}: {e}") from None
    if _does_nothing(kernel):        # only ret/exit: every check above still applied; no thread has an effect
      if not kernel.local_bytes_per_thread: launch["does_nothing"] = self.ranges.generation   # (the local check
      # depends on the channel's SET_SHADER_LOCAL_MEMORY state, which may change: such a kernel is checked each time)
      self.stats["launches"] += 1
      self._release(launch)
      return
    ntid, nctaid = SM.dims_from_cb0(self.read_bytes(cb0, min(cb0_size, SM.CB0_DIMS), "constant buffer 0"))
    limits, dynamic = SM.limits(launch, kernel, _ptx().executor.dynamic_shared_offset(kernel))
    limits.update(ntid=ntid, nctaid=nctaid)
    self._run_kernel(ch, kernel, grid, block, params, dynamic, limits)
    self._release(launch)

  def _release(self, launch: dict) -> None:
    """The QMD's enabled release semaphores once the grid is done (clc9c0qmd.h/clcbc0qmd.h RELEASE*_STRUCTURE_SIZE:
    ONE_WORD a 32-bit payload; TWO_WORDS the payload as 64 bits; FOUR_WORDS the payload's words then the GPU's
    nanosecond clock at +8; PAYLOAD64B gives the upper payload word, else it is 0)."""
    for _, size, wide, addr, payload in launch["releases"]:
      if not wide: payload &= 0xFFFFFFFF
      if size == qmd.STRUCTURE_SIZE["SEMAPHORE_ONE_WORD"]: self.write32(addr, payload, "QMD release semaphore")
      else:
        self.write64(addr, payload, "QMD release semaphore")
        if size == qmd.STRUCTURE_SIZE["SEMAPHORE_FOUR_WORDS"]:
          self.write64(addr + 8, self.clock_ns(), "QMD release semaphore timestamp")

  def _kernel(self, ch: Channel, pc: int):
    """The kernel at a program address. Cached per address while the GPU's mappings stay the same: code is loaded
    into fresh memory, and freeing or mapping memory changes the generation (code rewritten in place by a copy to
    the same address is not seen: the mock's instruction cache)."""
    gen = self.ranges.generation
    hit = self._programs.get(pc)
    if hit is not None and hit[0] == gen: return hit[1]
    k = self._load_kernel(ch, pc)
    if len(self._programs) > 256: self._programs.clear()
    self._programs[pc] = (gen, k)
    return k

  def _load_kernel(self, ch: Channel, pc: int):
    head = self.read_bytes(pc, 8, "program")
    if head != PTX_ENTRY_MAGIC:
      # SASS from an image that carries the kernel's PTX too (the driver's fatbin-like layout): the 16 bytes before
      # the code are the magic and the address of the kernel's PTX_ENTRY record
      back = self.read_bytes(pc - 16, 16, "program") if self.ranges.range_of(pc - 16) is not None else b""
      if back[:8] != PTX_ENTRY_MAGIC:
        text = self._ptx_image(pc)      # PTX text itself at the program address (what tinygrad loads on a mock)
        if text is not None: return self._kernel_of(ch, pc, pc, text, None)
        raise _diagnosed(ch, f"the program at {pc:#x} is SASS without its PTX: the mock NV GPU runs PTX only (load "
                             f"PTX, not a cubin)", ILLEGAL_INSTRUCTION)
      pc = int.from_bytes(back[8:], "little")
      if self.read_bytes(pc, 8, "program's PTX record") != PTX_ENTRY_MAGIC:
        raise _diagnosed(ch, f"the PTX record at {pc:#x} a program points to has no PTX_ENTRY magic")
    text_va, text_len, name_len = (int.from_bytes(self.read_bytes(pc + 8, 8), "little"),
                                   int.from_bytes(self.read_bytes(pc + 16, 4), "little"),
                                   int.from_bytes(self.read_bytes(pc + 20, 4), "little"))
    name = self.read_bytes(pc + PTX_ENTRY_HEADER, name_len, "program").decode(errors="replace")
    text = self.read_bytes(text_va, text_len, "PTX module text")
    return self._kernel_of(ch, pc, text_va, text, name)

  def _ptx_image(self, pc: int) -> bytes | None:
    """PTX text placed at the program address itself (a PTX module image, NUL-terminated: what tinygrad's NV driver
    loads on a mock interface, ops_nv.NVProgram), or None when the bytes there are not PTX text."""
    first = self.read_bytes(pc, 64, "program")
    if not first.lstrip(b" \t\r\n").startswith((b".", b"//")): return None
    chunks, addr = [], pc
    while True:
      chunk = self.read_bytes(addr, 0x1000 - (addr & 0xFFF), "PTX image")
      end = chunk.find(b"\0")
      chunks.append(chunk if end < 0 else chunk[:end])
      if end >= 0: return b"".join(chunks)
      addr += len(chunk)
      if addr - pc > (16 << 20): raise QueueError(f"{self.name}", f"PTX image at {pc:#x}: no NUL within 16 MiB")

  def _kernel_of(self, ch: Channel, pc: int, text_va: int, text: bytes, name: str | None):
    """The kernel `name` of the PTX module `text` (None: the module's only entry)."""
    key = (text_va, len(text), zlib.crc32(text))
    mod = self._modules.get(key)
    if mod is None:
      ptx = _ptx()
      if ptx is None: raise QueueError(ch.name, "the PTX interpreter (mockgpu.nv.ptx) is not available")
      try: mod = ptx.parse(text.decode(errors="replace"))
      except HCQError as e:      # kept: not parsed again
        mod = _diagnosed(ch, f"PTX module at {text_va:#x}: {e}", ILLEGAL_INSTRUCTION)
      if len(self._modules) > 64: self._modules.clear()
      self._modules[key] = mod
    if isinstance(mod, QueueError): raise mod
    if name is None:
      if len(mod.kernels) != 1:
        raise QueueError(ch.name, f"PTX image at {pc:#x} has {len(mod.kernels)} entries ({', '.join(sorted(mod.kernels))}): "
                                  f"a program address names one kernel")
      name = next(iter(mod.kernels))
    k = mod.kernels.get(name)
    if k is None: raise QueueError(ch.name, f"program at {pc:#x}: the PTX module has no kernel {name!r}")
    return k

  def _run_kernel(self, ch: Channel, kernel, grid, block, params: bytes, dynamic: int, limits: dict | None = None) -> None:
    if _does_nothing(kernel):      # only ret/exit: no thread has an effect (the interpreter's set-up is skipped)
      self.stats["launches"] += 1
      return
    ptx = _ptx()
    start = time.monotonic()
    # synchronous: the host waits inside the launch, so the kernel ends at the device timeout; threaded: the host's
    # own wait times out first (and names the kernel), then the mock ends it (a GPU watchdog's Xid 8)
    limit = self.timeout_s if not self.threaded else 2 * self.timeout_s + 1.0

    def stop() -> bool:
      # past the time limit the kernel ends (Xid 8) in threaded mode too: the worker holds the GPU's lock while it
      # runs, and host calls that need it (alloc, free, close) must not wait for an endless kernel for ever
      if self._stop or not ch.active: return True
      return time.monotonic() - start > limit
    try:
      with held_interrupt.interruptible():     # the GPU's own time: Ctrl-C is not held back while the kernel runs
        stats = ptx.run(kernel, grid=grid, block=block, params=params, memory=self.ranges, dynamic_shared=dynamic,
                        stop=stop, sm=limits)
    except ptx.Stopped:
      if not ch.active or self._stop: raise QueueError(ch.name, f"kernel {kernel.name} was stopped: its channel went away") from None
      e = QueueError(ch.name, f"kernel {kernel.name} ran for more than {limit:g} s (the mock's time limit) and was "
                              f"stopped")
      e.xid = ROBUST_CHANNEL_TIMEOUT
      raise e from None
    except GPUFault as e:
      e.add_note(f"{ch.name}: in kernel {kernel.name}")
      raise
    self.stats["launches"] += 1
    self.stats["thread_instructions"] += int((stats or {}).get("thread_instructions", 0))


ILLEGAL_INSTRUCTION = "Illegal Instruction Encoding"     # nvidia.ko's name of the SM exception for code it cannot run


def _diagnosed(ch: Channel, message: str, esr: str | None = None) -> QueueError:
  """What the SM refuses (a QMD field, an instruction): a graphics engine exception (Xid 13) with its reason; esr:
  the SM warp exception nvidia.ko would name."""
  e = QueueError(ch.name, message)
  e.xid, e.esr = ROBUST_CHANNEL_GR_EXCEPTION, esr
  return e


def xid_line(pci: str, code: int, token: int, e: BaseException, address: int | None, pid: int) -> str:
  """nvidia.ko's kernel log line for an Xid (the format of its "NVRM: Xid (PCI:dddd:bb:dd): N, pid=..." lines; an
  MMU fault's "faulted @ 0x<hi>_<lo>"), ending with the mock's diagnosis, marked "[mock diagnosis]"."""
  why = "; ".join([str(e), *getattr(e, "__notes__", ())])
  head = f"NVRM: Xid (PCI:{pci}): {code}, pid={pid}, name=python, Ch {token:08x}"
  if code == ROBUST_CHANNEL_MMU_FAULT and address is not None:
    head += f", MMU Fault: ENGINE GRAPHICS faulted @ 0x{address >> 32:08x}_{address & 0xFFFFFFFF:08x}"
  elif code == ROBUST_CHANNEL_GR_EXCEPTION:
    esr = getattr(e, "esr", None)
    head += f", Graphics SM Warp Exception on (GPC 0, TPC 0, SM 0): {esr}" if esr else ", Graphics Exception"
  elif code == ROBUST_CHANNEL_TIMEOUT: head += ", channel timeout"
  return f"{head}. [mock diagnosis] {why}"


_NOTHING: dict = {}      # id(kernel) -> (kernel, whether it has only ret/exit)


def _does_nothing(kernel) -> bool:
  hit = _NOTHING.get(id(kernel))
  if hit is not None and hit[0] is kernel: return hit[1]
  flag = all(i.op in ("ret", "exit") and i.guard is None for i in kernel.instrs)
  if len(_NOTHING) > 1024: _NOTHING.clear()
  _NOTHING[id(kernel)] = (kernel, flag)
  return flag


def _ptx():
  """The nvptx helper's interpreter (mockgpu.nv.ptx: parse, run, Stopped), None while it is not there."""
  try:
    from . import ptx
    return ptx
  except ImportError: return None
