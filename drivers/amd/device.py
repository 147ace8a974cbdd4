"""AMDDevice: the AMD vendor layer on the HCQ runtime (drivers/hcq/runtime.py), over an session (session.py: KFD now;
PCI/USB later) that gives it memory, queues with doorbells and fault events.

Engines: "compute", a PM4 compute queue (kernels, signals, timestamps, barriers), or on a multi-XCC part (gfx942,
MI300-class) an AQL queue carrying the same PM4 in indirect buffers and kernels as dispatch packets (aql.py), as the
reference runs them; and "copy", an SDMA queue. The compute registers and the cache-control packet forms are the GC
IP version's (pm4.gc_registers, from the generated gc_<version>_compute modules). What is
AMD's here: the PM4/SDMA packet tables (packets.py), the compute queue's register state (a launch whose static
registers are still on the queue sends only those that change), scratch, code-object loading, the interrupt that a
blocked wait asks for (KFD events), and bound launches as INDIRECT_BUFFERs."""
from __future__ import annotations

import dataclasses
from array import array

from ...compiler import queue as Q
from ...compiler.isa.amd.codeobject import CodeObject
from ...compiler.isa.amd.errors import ISAError
from ...compiler.ir import UOp
from ...errors import DeviceError
from ..hcq import Buffer, Ring, round_up
from ..hcq.engine import FIRST_VENDOR_SLOT, PREVIOUS_VALUE, T_END, T_START, TIMELINE, TIMELINE_VALUE, V_PREV, RingEngine
from ..hcq.runtime import HCQDevice, Submission
from . import aql, packets, pm4, sdma
from .packets import COMPUTE, COPY
from .program import AMDProgram, RepeatDispatch, image_at

IRQ_SLOT = FIRST_VENDOR_SLOT
IRQ = Q.signal(IRQ_SLOT, "interrupt request")
V_TIMELINE, V_KERNARG, V_DISPATCH = ("var", "timeline"), ("var", "kernarg"), ("var", "dispatch")

RING_SIZE = 1 << 20
# the engines' rings: kind of hardware queue, how the ring's end is crossed, bytes per write-pointer step
RINGS = {COMPUTE: ("compute", "split", 4), COPY: ("sdma", "pad", 1), aql.ENGINE: ("aql", "split", aql.PACKET_BYTES)}


@dataclasses.dataclass
class Scratch:
  """The scratch (private) memory of a device's kernels and the TMPRING_SIZE word that describes it."""
  va: int
  size: int
  per_thread: int
  tmpring: int


class AMDDevice(HCQDevice):
  buffer_type = Buffer
  ticks_per_us = pm4.TICKS_PER_US     # RELEASE_MEM GPU_CLOCK and SDMA TIMESTAMP count the 100 MHz GPU clock (pm4.py)

  def __init__(self, session, os, config):
    super().__init__(os, config)
    self.session = session
    self.arch, self.props = session.arch, session.props
    self.label = session.label
    self.name = f"{self.arch} on {session.label}"
    self._mems = []
    self._set_up(session, self._setup)   # a failure closes the session (/dev/kfd, the VM, the PCI lock)

  # ---- set-up
  def _host_memory(self, size: int):
    mem = self.session.alloc(size, kind="gtt")
    self._mems.append(mem)
    return mem.va, mem.cpu

  def _setup(self) -> None:
    try:
      self.regs = pm4.gc_registers(self.session.gc_ip)     # DeviceError for a GC version hcq has no registers of
      self.sdma = sdma.sdma_version(self.session.sdma_ip)  # the copy engine's packet differences (SDMA 4 on gfx942)
    except (DeviceError, ValueError) as e: raise DeviceError(f"{self.name}: {e}") from None
    self.soc15 = self.regs.ip[0] == 9             # gfx9: soc15d.h cache-control packets
    # AQL where the reference uses it: parts with several XCCs (MI300-class), whose CP spreads a dispatch packet over
    # the XCCs itself (a PM4 queue would need one PRED_EXEC-guarded stream per XCC)
    self.aql = self.props.get("num_xcc", 1) > 1
    # submissions do not interrupt; a host that blocks on a value asks for one interrupt at that value (_arm)
    self.packet_ctx = packets.PacketCtx(self.session.event_id, self.session.mailbox_va, interrupts=False, soc15=self.soc15,
                                    sdma=self.sdma)
    self._start_runtime()
    # the amd_queue_t kernels get as their queue pointer (queue_ptr, hidden_queue_ptr): an AQL queue's own, else a
    # zeroed one
    self.queue_desc_va = self.compute.ring.hwq.gart.va if self.aql else self._host_memory(0x1000)[0]
    irq_ctx = packets.PacketCtx(self.session.event_id, self.session.mailbox_va, interrupts=True, soc15=self.soc15,
                             sdma=self.sdma)
    # wait for the timeline, then store the value elsewhere (the timeline itself may be ahead by then) and interrupt
    self._arms = {name: e.build(Q.queue(name, Q.wait(TIMELINE, PREVIOUS_VALUE), Q.store(IRQ, PREVIOUS_VALUE)), irq_ctx)
                  for name, e in self.engines.items()}
    self._armed = 0            # the highest timeline value an interrupt was asked for
    # Register state of the compute queue. SET_SH_REG state stays on a queue from one dispatch to the next (and across
    # preemption: the queue's MQD saves COMPUTE_PGM_*, COMPUTE_USER_DATA_*, COMPUTE_NUM_THREAD_* ..., v11_structs.h
    # struct v11_compute_mqd), so a launch whose shape left its static registers on the queue last time sends only
    # the registers that change per launch (LaunchShape.cmd_repeat). _registers is the register_state key of the
    # launch that set them last, None when unknown (at start, after raw PM4 from submit_pm4).
    self._registers = None
    self._register_keys: dict[tuple, tuple] = {}
    self.scratch: Scratch | None = None
    self._old_scratch = []   # scratch areas that programs loaded earlier still point at

  def _vendor_links(self) -> dict:
    self.irq_signal = self.signals.alloc(0, name=f"{self.name} interrupt request signal")
    return {("param", IRQ_SLOT): self.irq_signal.va}

  def _make_engines(self, links: dict):
    engines = {name: RingEngine(name, packets.MATCHERS[name], self._make_ring(name, *RINGS[name]), self.packet_ctx, links)
               for name in ((COPY,) if self.aql else (COMPUTE, COPY))}
    if self.aql:
      ring = self._make_ring(COMPUTE, *RINGS[aql.ENGINE])
      ib = self.session.alloc(aql.ib_area_size(ring), kind="gtt")    # the PM4 of each ring slot's vendor packet
      self._mems.append(ib)
      engines[COMPUTE] = aql.AQLEngine(COMPUTE, packets.MATCHERS[COMPUTE], ring, ib.va, ib.cpu, self.packet_ctx, links)
      aql.describe_queue(ring.hwq.gart.cpu, ring.hwq.ring.va, ring.hwq.ring.size, self.props)
    return {name: engines[name] for name in (COMPUTE, COPY)}

  def _make_ring(self, name: str, kind: str, cross: str, unit: int) -> Ring:
    """A hardware queue from the session and the Ring that writes it; unit: bytes per write-pointer step."""
    hwq = self.session.create_queue(kind, RING_SIZE)
    u64 = hwq.gart.cpu.cast("B").cast("Q")
    wptr, rptr = u64[hwq.wptr_offset // 8:hwq.wptr_offset // 8 + 1], u64[hwq.rptr_offset // 8:hwq.rptr_offset // 8 + 1]
    doorbell = self.session.doorbell(hwq)
    if kind == "aql": doorbell = aql.doorbell(doorbell)
    ring = Ring(f"{self.name} {name} queue {hwq.queue_id}", hwq.ring.cpu.cast("I"), wptr, rptr, doorbell,
                unit, cross, self.os.memory_barrier, self.os.monotonic, self.os.sleep, self.timeout_s, idle=self._block,
                refresh=self._rptr_refresh(hwq, rptr))
    ring.hwq = hwq
    return ring

  def _rptr_refresh(self, hwq, rptr: memoryview):
    """What reads the engine's read pointer into `rptr` while a ring waits for space: None where rptr is the memory
    the engine writes (a device with memory the CPU cannot map reads it through the device: am/usb.py)."""
    return None

  # ---- the completion hook: an interrupt asked for at the awaited value, then a blocking wait in the kernel
  def _block(self, seconds: float) -> None:
    """Called by waits that are not done after their busy polls: block in KFD (which also reports GPU faults), after
    asking for an interrupt at the awaited timeline value."""
    if self._awaited is not None and self._armed < self._awaited: self._arm(self._awaited)
    t0 = self.os.monotonic()
    fired = self.session.wait_events(max(int(seconds * 1000), 0))
    if not fired and self.os.monotonic() - t0 < seconds / 2: self.os.sleep(seconds)

  def _arm(self, value: int) -> None:
    """Ask for an interrupt once the timeline reaches value: on the engine of the latest submission (which reaches
    it no later than the timeline does), a wait for the value, then a store to the interrupt request signal with the
    event interrupt. Nothing else waits for it: it takes no timeline value."""
    engine = self._last_engine
    if engine is None: return
    self._armed = value      # first: a ring-space wait inside the write below must not arm again
    engine.write(self._arms[engine.name].fill({V_PREV: value}))
    engine.commit()

  # ---- launches
  def register_state_key(self, key: tuple) -> tuple:
    """One object per distinct register state, so that launch() compares keys by identity."""
    return self._register_keys.setdefault(key, key)

  def _launch_words(self, prog: AMDProgram, shape, explicit: bytes, value: int):
    cmd, values = AMDDevice._launch_cmd(self, prog, shape, explicit, value)   # not a subclass's (usb.py wraps this)
    return cmd.fill(values)

  def _launch_cmd(self, prog: AMDProgram, shape, explicit: bytes, value: int):
    if shape.data_size:        # a kernel without arguments or dispatch packet needs no kernarg space
      ring = self.launch_data
      ka = ring.alloc(shape.data_size, value)
      off = ka - ring.va
      args = explicit + shape.hidden if shape.hidden else explicit
      self._launch_view[off:off + len(args)] = args
      dp = ka + prog.layout.segment_size
      if prog.dispatch_ptr: self._launch_view[dp - ring.va:dp - ring.va + 64] = prog.dispatch_packet(shape, ka)
    else: ka = dp = 0
    registers = shape.registers
    cmd = shape.cmd_repeat if self._registers is registers else shape.cmd
    self._registers = registers    # the queue holds this launch's registers from now on (_abandoned: unless not sent)
    return cmd, {V_KERNARG: ka, V_DISPATCH: dp, V_TIMELINE: value}

  def _abandoned(self, engine) -> None:
    if engine is self.compute: self._registers = None   # unknown: the next launch sends every register

  def submit_pm4(self, words) -> int:
    """Run raw PM4 dwords on the compute engine, then signal the timeline. Returns the timeline value."""
    with self._open_lock():
      self._registers = None      # raw packets may set any register (also when the submission fails halfway)
      with Submission(self, self.compute, "raw PM4 packets") as sub: sub.add(array("I", list(words)))
    return sub.value

  # ---- bound launches: the launches' kernargs and one command buffer in device memory, run by INDIRECT_BUFFER
  def _record(self, planned):
    return _BoundIB(self, planned)

  def _replay_words(self, rec: "_BoundIB"):
    return rec.ib_repeat_words if self._registers is rec.first_registers else rec.ib_words

  def _replayed(self, rec: "_BoundIB") -> None:
    self._registers = rec.registers     # after a run the queue holds the last launch's registers

  # ---- memory
  def _alloc(self, nbytes: int, host: bool = False, cpu_access: bool = False) -> Buffer:
    with self._open_lock():
      mem = self.session.alloc(nbytes, kind="gtt" if host else "vram", cpu_access=cpu_access)
    return Buffer(self, mem.va, nbytes, handle=mem, cpu_view=mem.cpu, kind="host" if host else "device")

  def _free_memory(self, buf: Buffer) -> None:
    self.session.free(buf.handle)

  # ---- another device in this GPU's address space (drivers/hcq/p2p.py: the GPU queue drives a NIC)
  def map_host(self, va: int, size: int, what: str) -> int:
    """Host memory another driver allocated (a NIC's send and completion queues) made reachable by this GPU's engines;
    returns its GPU address (== va on KFD). Unmapped when the device closes."""
    if not hasattr(self.session, "register_host"):
      raise DeviceError(f"{self.name}: mapping host memory of another device is not implemented on {self.label}")
    with self._open_lock(): return self.session.register_host(va, size, what).va

  def dma_pages(self, buf: Buffer) -> list[int]:
    """The bus addresses of buf's 4 KiB pages, for another device's DMA (a NIC memory region). Host-visible memory is
    host pages, found through the OS (os.phys_addrs: /proc/self/pagemap on Linux). VRAM on AM is its window in the
    VRAM BAR (the BAR's bus address + the buffer's VRAM offset: a peer's DMA there reaches VRAM), which needs the
    buffer inside the BAR's aperture (a large BAR); on KFD VRAM has no pages a peer can use here: DeviceError."""
    size = (buf.size + 0xFFF) & ~0xFFF
    if buf.kind == "host": return list(self.os.phys_addrs(buf.va, size))
    vram, am = getattr(buf.handle, "vram", None), getattr(self.session, "am", None)
    if vram is None or am is None:
      raise DeviceError(f"{self.name}: {buf!r} is VRAM; on {self.label} a peer reaches only host-visible memory "
                        f"(alloc(host=True))")
    aperture = am.pci.bar_size("vram")
    if vram.offset + size > aperture:
      raise DeviceError(f"{self.name}: {buf!r} lies at VRAM {vram.offset:#x}+{size:#x}, beyond the VRAM BAR's "
                        f"{aperture:#x}-byte aperture: a peer cannot reach it (resize the BAR)")
    base = am.pci.vram_bus_address() + vram.offset
    return [base + i for i in range(0, size, 0x1000)]

  def map_peer_bar(self, pci, index: int, size: int, offset: int, what: str) -> int:
    """size bytes from offset of memory BAR `index` of another PCI function (a drivers/system PCIDevice) in this GPU's
    address space, for the engines' stores (a NIC doorbell page); returns the GPU address. KFD: a dma-buf the OS
    exports, imported with AMDKFD_IOC_IMPORT_DMABUF (kfd.py import_bar; a DeviceError where the OS has no exporter).
    AM: system PTEs to the BAR's bus address in the GPU's page tables (am/peer.py)."""
    with self._open_lock():
      if hasattr(self.session, "import_bar"): return self.session.import_bar(pci.resource_path(index), size, offset, what).va
      if hasattr(self.session, "am"):
        from .am import peer
        return peer.map_bar(self.session, pci.bar(index).start + offset, size, what)
    raise DeviceError(f"{self.name}: mapping a peer's BAR into the GPU is not implemented on {self.label}")

  # ---- programs
  def _kernel_names(self, image: bytes) -> list[str] | None:
    """The code object's kernels (Device.load gives a Module when there are several); None when it does not parse
    (_load then names what is wrong)."""
    try: return list(CodeObject.parse(image).kernels)
    except ISAError: return None

  def _load(self, image: bytes, name: str | None):
    try: co = CodeObject.parse(image)
    except ISAError as e: raise DeviceError(f"{self.name}: not a loadable code object: {e}") from None
    target = co.target.rsplit("-", 1)[-1].split(":")[0]   # "amdgcn-amd-amdhsa--gfx1100[:xnack-]" -> "gfx1100"
    if target != self.arch:
      raise DeviceError(f"{self.name}: the code object is for {target}, this device is {self.arch}")
    # the ELF header's EF_AMDGPU_MACH must say the same as the metadata (a loader that trusts one of them runs code
    # built for another processor); the xnack/sramecc feature bits are not checked (a mock or KFD device reports no
    # mode, and code built for "any" runs in both)
    if co.mach != target:
      raise DeviceError(f"{self.name}: the code object's metadata says {target} but its ELF e_flags say {co.mach}")
    if co.code_object_version not in (4, 5):
      raise DeviceError(f"{self.name}: code object version {co.code_object_version} (hcq loads v4 and v5: kernarg "
                        f"layout and hidden arguments from their metadata)")
    if not co.kernels: raise DeviceError(f"{self.name}: the code object has no kernels")
    missing = co.undefined_symbols
    if missing:
      raise DeviceError(f"{self.name}: the code object needs {', '.join(missing)}, which it does not define (link it "
                        f"with what defines them, e.g. the ROCm device libraries, or remove the calls)")
    if name is None:
      if len(co.kernels) > 1:
        raise DeviceError(f"{self.name}: the code object has {len(co.kernels)} kernels ({', '.join(co.kernels)}); name one")
      name = next(iter(co.kernels))
    if name not in co.kernels:
      raise DeviceError(f"{self.name}: no kernel {name!r} in the code object (it has {', '.join(co.kernels)})")
    def upload():               # one upload per code object, shared by its kernels
      size = round_up(len(co.image), 0x1000)
      mem = self.session.alloc(size, kind="vram")
      self._mems.append(mem)
      self._copyin(Buffer(self, mem.va, size, handle=mem, kind="code"), memoryview(image_at(co, mem.va)), 0)
      return mem.va, size
    return AMDProgram(self, co.kernels[name], *self._loaded_image(bytes(image), upload))

  def scratch_for(self, private_bytes: int) -> Scratch:
    """Scratch (architected flat scratch) big enough for private_bytes per lane on every wave slot; grown on demand.
    WAVESIZE counts the GC version's units per wave (256 bytes from gfx11 on, 1 KiB on gfx9) for 64 lanes (the widest
    wave of every target), WAVES the waves per shader engine."""
    per_thread = round_up(private_bytes, 4)
    if self.scratch and self.scratch.per_thread >= per_thread: return self.scratch
    p = self.props
    se = max(p.get("array_count", 1) // max(p.get("simd_arrays_per_engine", 1), 1), 1)
    cu = max(p.get("simd_count", 2) // max(p.get("simd_per_cu", 2), 1), 1)
    slots = p.get("max_slots_scratch_cu", 32)
    granule = self.regs.tmpring_granule
    wavesize = (64 * per_thread + granule - 1) // granule
    if wavesize > self.regs.max_wavesize:
      raise DeviceError(f"{self.name}: {private_bytes} bytes of scratch per lane exceed COMPUTE_TMPRING_SIZE.WAVESIZE "
                        f"({self.regs.max_wavesize} units of {granule} bytes per wave)")
    waves = min(cu * slots // se, 0xFFF)
    size = wavesize * granule * waves * se
    if self.aql and size // self.props.get("num_xcc", 1) > 0xFFFFFFFF:   # the AQL scratch resource's NUM_RECORDS is 32 bits
      raise DeviceError(f"{self.name}: {private_bytes} bytes of scratch per lane need {size // self.props.get('num_xcc', 1)} "
                        f"bytes per XCC, past the 4 GiB an AQL queue's scratch descriptor holds")
    mem = self.session.alloc(size, kind="vram")
    if self.scratch: self._old_scratch.append(self.scratch)
    self._mems.append(mem)
    self.scratch = Scratch(mem.va, size, per_thread, self.regs.tmpring_size(waves, wavesize))
    if self.aql:    # the CP takes an AQL dispatch's private segment from the queue's amd_queue_t
      # ... for every dispatch it reads: work already queued must finish before those fields change under it (the
      # reference runtime changes them with the queue stopped); this happens only when scratch grows
      if self.timeline.value: self.wait_value(self.timeline.value)
      aql.describe_scratch(self.compute.ring.hwq.gart.cpu, self.regs, self.scratch, self.props.get("num_xcc", 1))
    return self.scratch

  def _compile(self, sink):
    try: from ...compiler.backend.amd import compile_kernel  # the RDNA3 backend, when present
    except ImportError as e: raise DeviceError(f"{self.name}: the AMD compiler backend is not available ({e})") from None
    return self.load(compile_kernel(sink, self.arch))

  def _release_hardware(self) -> None:
    self.session.close()    # destroys the queues (which stops them) before it frees the memory

  def __repr__(self): return f"AMDDevice({self.name})"


class _BoundIB:
  """Bound launches as one command buffer in device memory: barrier + dispatch per launch (the packets of a queue
  program), each with its kernargs recorded next to it; a run writes only an INDIRECT_BUFFER packet."""

  def __init__(self, dev: AMDDevice, planned):
    layout, offset = [], 0
    for prog, shape, explicit in planned:
      layout.append((prog, shape, explicit, offset))
      offset = round_up(offset + shape.data_size, 64)
    ka = self.kernargs = dev.session.alloc(offset, kind="gtt")
    dev._mems.append(ka)
    values = {}
    for i, (prog, shape, explicit, off) in enumerate(layout):
      view = ka.cpu[off:off + shape.data_size]
      view[:len(explicit)] = explicit
      view[len(explicit):len(explicit) + len(shape.hidden)] = shape.hidden
      seg = prog.layout.segment_size
      if prog.dispatch_ptr: view[seg:seg + 64] = prog.dispatch_packet(shape, ka.va + off)
      # each launch gets its own kernarg/dispatch variables: ("var", "kernarg.i") etc.
      values[("var", f"kernarg.{i}")], values[("var", f"dispatch.{i}")] = ka.va + off, ka.va + off + seg
    # A launch that follows one with the same static registers sends only those that change (see AMDDevice). Two
    # buffers: one for a queue in any state, and, when it is shorter, one for a queue that already holds the first
    # launch's registers (a bound launch run again, or run after a launch of the same shape).
    full = self._words(dev, layout, values, first_repeats=False)
    self.first_registers = layout[0][1].registers
    self.registers = layout[-1][1].registers
    if dev.aql:     # dispatch packets go on the AQL ring itself: a run writes the recorded words again (aql.py)
      self.ib_words = self.ib_repeat_words = full
      return
    repeat = self._words(dev, layout, values, first_repeats=True)
    if len(repeat) == len(full): repeat = full
    ib = self.ib = dev.session.alloc((len(full) + (len(repeat) if repeat is not full else 0)) * 4, kind="gtt")
    dev._mems.append(ib)
    ib.cpu.cast("I")[:len(full)] = full
    self.ib_words = array("I", pm4.indirect_buffer(ib.va, len(full)))
    self.ib_repeat_words = self.ib_words
    if repeat is not full:
      ib.cpu.cast("I")[len(full):len(full) + len(repeat)] = repeat
      self.ib_repeat_words = array("I", pm4.indirect_buffer(ib.va + 4 * len(full), len(repeat)))

  @staticmethod
  def _words(dev: AMDDevice, layout, values, first_repeats: bool):
    elements, before = [], None
    for i, (prog, shape, _, _) in enumerate(layout):
      kv, dv = UOp.variable(f"kernarg.{i}", 0, 2**64 - 1), UOp.variable(f"dispatch.{i}", 0, 2**64 - 1)
      handle = prog.with_lds(shape.lds)
      if shape.registers is before or (i == 0 and first_repeats): handle = RepeatDispatch(handle)
      elements += [Q.barrier(), Q.call(Q.program(prog.name, (handle, kv, dv), shape.grid, shape.block))]
      before = shape.registers
    return dev.compute.build(Q.queue(COMPUTE, *elements)).fill(values)
