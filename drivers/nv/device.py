"""NVDevice: the NV vendor layer on the HCQ runtime (drivers/hcq/runtime.py), over RMSession (rm.py).

Engines: "compute", a GPFIFO channel with the compute object on subchannel 1 (launches by QMD, semaphores), and
"copy", a GPFIFO channel with the copy object on subchannel 4; both turn queue programs into packets by the pattern matchers of
packets.py. What is NV's here: the QMD of each launch (a per-shape template of the GPU's QMD version: v3 on
Ampere/Ada, v4 on Hopper; the constant buffer address filled per launch; a shape keeps its launch data while its
parameters repeat, see _launch_words), the CUDA parameter bank in constant buffer 0, code loading (cubins; PTX compiled to a cubin when a compiler is found, the PTX kept beside the SASS as in
a CUDA fatbin), and faults read from the channels' error notifiers (the Xid) and nvidia.ko's kernel log (its cause)
when a wait blocks. The driver does not know whether the GPU is real: a GPU that runs PTX finds it in the image."""
from __future__ import annotations

import re
import struct
from array import array

from ...errors import DeviceError, GPUFault, QueueError
from ..hcq import Buffer, round_up
from ..hcq.engine import V_TIMELINE
from ..hcq.runtime import HCQDevice, Submission
from ...autogen.nv import rm_abi as abi
from . import gpfifo as G, packets, qmd
from .sm import (CB0_DIMS_END, LOCAL_RESERVE, MAX_LOCAL_PER_THREAD, carveouts_kb, max_threads_for_registers, sass_version, shared_memory_size,
                 sm_config)
from .program import (EM_CUDA, PARAM_BASE, NVProgram, compile_ptx, cubin_kernels, is_ptx, ptx_image, ptx_kernels)

GPFIFO_ENTRIES = 0x400
PUSHBUFFER_SIZE = 1 << 20
KEPT_LAUNCH_DATA = 64 << 10     # host memory for the shapes' kept launch data (about 50 shapes; the others use the ring)
QMD_MAJOR = {abi.AMPERE_COMPUTE_B: 3, abi.ADA_COMPUTE_A: 3, abi.HOPPER_COMPUTE_A: 4, abi.BLACKWELL_COMPUTE_A: 5}
SHARED_WINDOW, LOCAL_WINDOW = 0x729400000000, 0x729300000000
# nverror.h robust-channel errors (Xids) an error notifier may report
ROBUST_CHANNEL_ERRORS = {8: "the channel timed out: a kernel ran past the time limit", 13: "graphics engine exception",
                         31: "MMU fault", 43: "the channel was reset"}


_FAULTED_AT = re.compile(r"faulted @ 0x([0-9a-fA-F_]+)")
_CB_ADDR = struct.Struct("<II")      # constant buffer 0's address in the QMD: the lower dword, the upper one


def _fill_positions(cmd) -> tuple | None:
  """(cmd, its template, the positions of the QMD address >> 8 and of the timeline value's low and high dwords) when
  those three are all its patches (a launch's command buffer: packets.py _call, then the timeline store; a timed
  launch's timestamps are linked to the device's signals already); else None (then cmd.fill())."""
  where = {(p.key, p.shift, p.add): i for i, p in cmd.patches}
  if len(cmd.patches) != 3 or set(where) != {(packets.V_QMD, 8, 0), (V_TIMELINE, 0, 0), (V_TIMELINE, 32, 0)}: return None
  return cmd, array("I", cmd.template), where[(packets.V_QMD, 8, 0)], where[(V_TIMELINE, 0, 0)], where[(V_TIMELINE, 32, 0)]


class NVDevice(HCQDevice):
  buffer_type = Buffer
  ticks_per_us = 1000.0        # semaphore release timestamps count nanoseconds

  def __init__(self, session, os, config):
    super().__init__(os, config)
    self.session, self.label = session, session.label
    self.arch = session.arch
    self.compute_class, self.copy_class = session.compute_class, session.copy_class
    self.name = f"{self.arch} on {session.label}"
    self.param_base = PARAM_BASE.get(session.sm_version >> 8, 0x160)
    # shared memory a CTA may use (CUDA programming guide, compute capabilities table): 227 KiB on sm_90, 99 KiB on
    # sm_86/89, 163 KiB on sm_80
    self.max_shared = {9: 227 << 10, 10: 227 << 10}.get(session.sm_version >> 8, 163 << 10 if session.sm_version == 0x800 else 99 << 10)
    self.carveouts_kb, self.sass_version = carveouts_kb(session.sm_version), sass_version(session.sm_version)
    self._cubins: dict[bytes, bytes] = {}    # PTX text -> the cubin compiled from it (a GPU that runs SASS)
    self._local, self._old_local, self._local_per_thread = None, [], 0
    self._no_sass: dict[str, str] = {}       # kernels loaded as PTX alone: why (for an engine exception's message)
    # constant buffer 0's driver words (reference 1.6): the shared and local memory windows and 0xfffdc0, at dwords
    # 6..10 before Blackwell, 188..191 and 223 on Blackwell (generic addressing of shared/local memory reads them)
    if session.sm_version >> 8 >= 10:
      self._cb0_driver = struct.pack("<QQ", SHARED_WINDOW, LOCAL_WINDOW) + bytes(4 * (223 - 192)) + struct.pack("<I", 0xFFFDC0)
    else: self._cb0_driver = struct.pack("<QQI", SHARED_WINDOW, LOCAL_WINDOW, 0xFFFDC0)
    self._cb0_driver_offset = 4 * 188 if session.sm_version >> 8 >= 10 else 4 * 6
    self._kept_va = self._kept_view = None    # the shapes' kept launch data (_kept_slot), made at the first launch
    self._set_up(session, self._setup)     # a failure closes the session (the RM client, its channels)

  def _setup(self) -> None:
    self.qmd_major = QMD_MAJOR[self.compute_class]
    self.qmd_layout = qmd.for_major(self.qmd_major)
    self.qmd_size = self.qmd_layout.size_bytes
    # constant buffer 0's address fields, patched per launch: V03 holds the address, V04/V05 the address >> 6; in
    # each the lower field is a whole dword and the upper one the low bits of the next dword
    lower_f, upper_f, self._cb_shift = (("CONSTANT_BUFFER_ADDR_LOWER_0", "CONSTANT_BUFFER_ADDR_UPPER_0", 0)
                                        if self.qmd_major == 3 else ("CONSTANT_BUFFER_ADDR_LOWER_SHIFTED6_0",
                                                                     "CONSTANT_BUFFER_ADDR_UPPER_SHIFTED6_0", 6))
    (lhi, llo), (uhi, ulo) = self.qmd_layout[lower_f], self.qmd_layout[upper_f]
    if llo % 32 or lhi != llo + 31 or ulo != llo + 32:
      raise DeviceError(f"{self.name}: QMD v{self.qmd_major}'s constant buffer address is not a dword and the next")
    self._cb_byte, self._cb_upper_mask = llo // 8, (1 << (uhi - ulo + 1)) - 1
    self.channels = {packets.COMPUTE: self.session.create_channel(self.compute_class, GPFIFO_ENTRIES),
                     packets.COPY: self.session.create_channel(self.copy_class, GPFIFO_ENTRIES)}
    self.session.schedule()
    self._start_runtime()
    # bind the engine objects to their subchannels; the compute channel's shared and local memory windows
    w = G.method(G.SUBC_COMPUTE, G.SET_OBJECT, self.compute_class)
    w += G.method(G.SUBC_COMPUTE, G.SET_SHADER_SHARED_MEMORY_WINDOW_A, SHARED_WINDOW >> 32, SHARED_WINDOW & 0xFFFFFFFF)
    w += G.method(G.SUBC_COMPUTE, G.SET_SHADER_LOCAL_MEMORY_WINDOW_A, LOCAL_WINDOW >> 32, LOCAL_WINDOW & 0xFFFFFFFF)
    with Submission(self, self.compute, "the compute channel's set-up") as sub: sub.add(array("I", w))
    with Submission(self, self.copy, "the copy channel's set-up") as sub:
      sub.add(array("I", G.method(G.SUBC_COPY, G.SET_OBJECT, self.copy_class)))
    self.synchronize()

  # ---- runtime hooks
  def _host_memory(self, size: int):
    mem = self.session.alloc(size, kind="host")
    return mem.va, mem.cpu

  def _make_engines(self, links: dict):
    engines = {}
    for name, ch in self.channels.items():
      va, cpu = self._host_memory(PUSHBUFFER_SIZE)
      engines[name] = G.GPFifoEngine(name, packets.MATCHERS[name], None, links, ch, va, cpu, self.os, self.timeout_s,
                                     idle=self._block)
    return engines

  def _block(self, seconds: float) -> None:
    """A wait that is not done after its busy polls: a channel whose error notifier holds an error stopped (raise
    it), else sleep (the GPU runs in the sleep)."""
    for name, ch in self.channels.items():
      err = self.session.channel_error(ch)
      if err is None: continue
      code = err[0]      # (the notifier's bytes 16..24 are the next record's timestamp, not a fault address)
      what = ROBUST_CHANNEL_ERRORS.get(code, f"robust-channel error {code}")
      line = self._xid_log_line(code)
      said = f"; nvidia.ko's log: {line}" if line else ""
      if code == 31:
        m = _FAULTED_AT.search(line or "")
        address = int(m.group(1).replace("_", ""), 16) if m else None
        raise GPUFault(f"{self.label}: the {name} channel stopped: {what}{said}", address=address, kind="page fault")
      # an illegal instruction may be code that is not SASS at all: PTX loaded without a compiler
      if code == 13 and self._no_sass and (line is None or "Illegal Instruction" in line):
        n, why = next(iter(self._no_sass.items()))
        said += f"; kernel {n} was loaded without SASS, which a GPU that runs SASS cannot execute ({why})"
      raise QueueError(f"{self.name} {name} channel", f"stopped with robust-channel error {code} ({what}){said}")
    self.os.sleep(seconds)

  def _xid_log_line(self, code: int) -> str | None:
    """nvidia.ko's newest kernel log line for Xid `code` on this GPU ("NVRM: Xid (PCI:dddd:bb:dd): code, ..."): on
    hardware it names the exception (an MMU fault's address), which the error notifier does not hold."""
    log = getattr(self.os, "kernel_log", None)
    bus = getattr(self.session, "pci_bus", None)
    if log is None or not bus: return None
    tag = f"Xid (PCI:{bus.rsplit('.', 1)[0]}): {code},"
    return next((line for line in reversed(log()) if tag in line), None)

  def _release_hardware(self) -> None: self.session.close()

  # ---- launches
  def qmd_template(self, prog: NVProgram, grid, block, dynamic_shared: int = 0) -> tuple[bytearray, int]:
    """(the QMD of a launch of this shape with its constant buffer address left 0, the constant buffer's size):
    built once per launch shape (NVProgram.shape_data)."""
    k, layout = prog.kernel, self.qmd_layout
    cb_size = round_up(max(prog.param_base + k.param_bytes, CB0_DIMS_END), 16)
    user_shared = k.shared + dynamic_shared
    if user_shared > self.max_shared:
      raise DeviceError(f"kernel {k.name}: {k.shared} bytes of static and {dynamic_shared} of dynamic shared memory "
                        f"exceed the {self.max_shared} bytes a CTA may have on {self.arch}")
    shared = shared_memory_size(user_shared)
    threads = block[0] * block[1] * block[2]
    regs_limit = max_threads_for_registers(k.registers)
    if threads > regs_limit:
      raise DeviceError(f"kernel {k.name}: a CTA of {threads} threads needs more than the SM's 64 K registers at "
                        f"{k.registers} registers a thread (at most {regs_limit} threads)")
    if k.local > MAX_LOCAL_PER_THREAD:
      raise DeviceError(f"kernel {k.name}: {k.local} bytes of local memory a thread exceed the {MAX_LOCAL_PER_THREAD} "
                        f"bytes a thread may have")
    # the thread's local memory: the kernel's stack/local arrays plus the 0x240 bytes the SASS ABI keeps at the top
    # of the high window (the stack grows down from c[0][0x28] = 0xfffdc0 = 16 MiB - 0x240); the QMD gives every
    # thread the device's per-thread local size in the HIGH window (LOW stays 0)
    slm = self._ensure_local(k.local + LOCAL_RESERVE)
    f = dict(QMD_MAJOR_VERSION=self.qmd_major, QMD_GROUP_ID=0x3F, CTA_THREAD_DIMENSION0=block[0],
             CTA_THREAD_DIMENSION1=block[1], CTA_THREAD_DIMENSION2=block[2], BARRIER_COUNT=1,
             CONSTANT_BUFFER_VALID_0=1, CONSTANT_BUFFER_SIZE_SHIFTED4_0=cb_size >> 4,
             SASS_VERSION=self.sass_version)
    pc = prog.code_va
    if self.qmd_major == 3:      # V03_00 (Ampere, Ada)
      f.update(CTA_RASTER_WIDTH=grid[0], CTA_RASTER_HEIGHT=grid[1], CTA_RASTER_DEPTH=grid[2], SHARED_MEMORY_SIZE=shared,
               REGISTER_COUNT_V=k.registers, SHADER_LOCAL_MEMORY_HIGH_SIZE=slm,
               PROGRAM_ADDRESS_LOWER=pc & 0xFFFFFFFF, PROGRAM_ADDRESS_UPPER=pc >> 32)
    else:                        # V04_00 (Hopper), V05_00 (Blackwell): QMD_TYPE GRID_CTA, GRID_* sizes
      f.update(QMD_TYPE=qmd.VALUES["QMD_TYPE"]["GRID_CTA"], GRID_WIDTH=grid[0],
               GRID_HEIGHT=grid[1], GRID_DEPTH=grid[2], REGISTER_COUNT=k.registers)
      if self.qmd_major == 4:
        f.update(SHARED_MEMORY_SIZE=shared, SHADER_LOCAL_MEMORY_HIGH_SIZE=slm, PROGRAM_ADDRESS_LOWER=pc & 0xFFFFFFFF,
                 PROGRAM_ADDRESS_UPPER=pc >> 32)
      else:                      # V05_00 keeps sizes and the program address shifted
        if pc & 0xF: raise DeviceError(f"kernel {k.name}: program address {pc:#x} is not 16-byte aligned (QMD V05_00)")
        f.update(SHARED_MEMORY_SIZE_SHIFTED7=shared >> 7, SHADER_LOCAL_MEMORY_HIGH_SIZE_SHIFTED4=slm >> 4,
                 PROGRAM_ADDRESS_LOWER_SHIFTED4=(pc >> 4) & 0xFFFFFFFF, PROGRAM_ADDRESS_UPPER_SHIFTED4=pc >> 36)
    # the instruction prefetch of the program (PROGRAM_PREFETCH_*: address >> 8, size in 256-byte units, 9 bits;
    # tinygrad 0.14's ops_nv.py sets them the same way on hardware)
    f.update(PROGRAM_PREFETCH_ADDR_LOWER_SHIFTED=(pc >> 8) & 0xFFFFFFFF, PROGRAM_PREFETCH_ADDR_UPPER_SHIFTED=pc >> 40,
             PROGRAM_PREFETCH_SIZE=min(max(prog.code_size, 1) >> 8, 0x1FF))
    # what every launch sets on hardware (reference 1.6): caches invalidated, the call limit and sampler index
    # modes, a system-scope membar at the end of the grid, the SM's shared memory configuration
    f.update({n: 1 for n in ("INVALIDATE_TEXTURE_HEADER_CACHE", "INVALIDATE_TEXTURE_SAMPLER_CACHE",
                             "INVALIDATE_TEXTURE_DATA_CACHE", "INVALIDATE_SHADER_DATA_CACHE",
                             "INVALIDATE_INSTRUCTION_CACHE", "INVALIDATE_SHADER_CONSTANT_CACHE",
                             "API_VISIBLE_CALL_LIMIT", "SAMPLER_INDEX", "CWD_MEMBAR_TYPE")})
    if "SM_GLOBAL_CACHING_ENABLE" in layout: f["SM_GLOBAL_CACHING_ENABLE"] = 1
    config = sm_config(self.carveouts_kb, shared)
    if config is None:
      raise DeviceError(f"kernel {k.name}: {shared} bytes of shared memory (with the 1 KiB reserve) exceed the largest "
                        f"shared memory carve-out of {self.arch} ({self.carveouts_kb[-1]} KiB)")
    f.update(MIN_SM_CONFIG_SHARED_MEM_SIZE=config, TARGET_SM_CONFIG_SHARED_MEM_SIZE=config,
             MAX_SM_CONFIG_SHARED_MEM_SIZE=sm_config(self.carveouts_kb, self.carveouts_kb[-1] << 10))
    return bytearray(qmd.encode(layout, **f)), cb_size

  def _ensure_local(self, per_thread: int) -> int:
    """Local memory (thread stacks, local arrays) for per_thread bytes on every warp slot of the GPU, grown on
    demand (reference 1.6): SET_SHADER_LOCAL_MEMORY_A/B = its address, NON_THROTTLED_A/B/C = bytes per TPC.
    Under the device lock: shapes are made without it (drivers/hcq/program.py), and two threads growing it at once
    could otherwise both allocate, and the smaller set-up reach the channel last."""
    with self._open_lock():
      self._grow_local(round_up(per_thread, 32))
      return self._local_per_thread

  def _grow_local(self, slm: int) -> None:
    if slm <= self._local_per_thread: return
    g = self.session.gr
    per_tpc = round_up(round_up(slm * 32, 0x200) * g["max_warps_per_sm"] * g["sm_per_tpc"], 0x8000)
    total = round_up(per_tpc * g["tpc_per_gpc"] * g["gpcs"], 0x20000)
    mem = self.session.alloc(total, kind="vram")
    w = G.method(G.SUBC_COMPUTE, G.SET_SHADER_LOCAL_MEMORY_A, mem.va >> 32, mem.va & 0xFFFFFFFF)
    w += G.method(G.SUBC_COMPUTE, G.SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_A, per_tpc >> 32, per_tpc & 0xFFFFFFFF, 0xFF)
    with Submission(self, self.compute, ("local memory of {} bytes per thread", slm)) as sub: sub.add(array("I", w))
    if self._local is not None: self._old_local.append(self._local)   # launches before may still use it
    self._local, self._local_per_thread = mem, slm

  def _launch_words(self, prog: NVProgram, shape, explicit: bytes, value: int):
    # the launch data, constant buffer 0 then the QMD, is the shape's image (_launch_image) with the parameters and
    # constant buffer 0's address patched in; the image is made again when the shape's QMD or dims changed
    img = shape.launch_image
    if img is None or img[0] != shape.qmd or img[1] != shape.dims: img = self._launch_image(shape)
    cb = img[3]
    kept = shape.kept_launch
    if kept is not None and kept[0] is img and kept[1] == explicit:
      # the launch data this shape's last launch with these parameters used, unchanged since (nothing writes it
      # while a launch that reads it may be in flight): read again by this launch
      va = kept[2]
      kept[3] = value
    elif kept is not None and self.timeline.signal.value >= kept[3]:
      # other parameters (or a new image), and every launch that read the kept data is done: written over
      va = kept[2]
      self._write_launch_data(self._kept_view, va - self._kept_va, img, prog, explicit, va)
      kept[:] = [img, explicit, va, value]
    elif kept is None and (va := self._kept_slot(len(img[2]))) is not None:
      self._write_launch_data(self._kept_view, va - self._kept_va, img, prog, explicit, va)
      shape.kept_launch = [img, explicit, va, value]
    else:      # in the launch data ring, tagged with this submission's timeline value
      va = self.launch_data.alloc(len(img[2]), value, align=256)
      self._write_launch_data(self._launch_view, va - self.launch_data.va, img, prog, explicit, va)
    words = img[6]
    if words is None or words[0] is not shape.cmd: return shape.cmd.fill({packets.V_QMD: va + cb, V_TIMELINE: value})
    # shape.cmd.fill() of its three patches (_fill_positions), without the values dict and the patch loop
    out = words[1][:]
    out[words[2]] = ((va + cb) >> 8) & 0xFFFFFFFF
    out[words[3]] = value & 0xFFFFFFFF
    out[words[4]] = (value >> 32) & 0xFFFFFFFF
    return out

  def _write_launch_data(self, view, off: int, img: tuple, prog: NVProgram, explicit: bytes, va: int) -> None:
    """The shape's image at view[off:] (device address va) with the parameters and constant buffer 0's address."""
    image, at, upper = img[2], img[4], img[5]
    view[off:off + len(image)] = image
    if explicit:
      base = off + prog.param_base
      view[base:base + len(explicit)] = explicit
    a = va >> self._cb_shift
    _CB_ADDR.pack_into(view, off + at, a & 0xFFFFFFFF, upper | ((a >> 32) & self._cb_upper_mask))

  def _kept_slot(self, size: int) -> int | None:
    """The address of `size` bytes (256-aligned: the QMD's address is given >> 8) of host memory a shape keeps its
    launch data in for as long as the device is open; None once KEPT_LAUNCH_DATA is used up (those shapes' launches
    take ring space each)."""
    if self._kept_va is None:
      self._kept_va, self._kept_view = self._host_memory(KEPT_LAUNCH_DATA)
      self._kept_used = 0
    size = round_up(size, 256)
    if self._kept_used + size > KEPT_LAUNCH_DATA: return None
    va = self._kept_va + self._kept_used
    self._kept_used += size
    return va

  def _launch_image(self, shape) -> tuple:
    """(the QMD and dims it was made from, the launch data's image, the QMD's offset in it, the offset of constant
    buffer 0's address in it, the bits of the address's upper dword that are other fields'): constant buffer 0
    (blockDim/gridDim at c[0][0x0], the driver words, zeros for the parameters; the buffer rounded up to 256 bytes)
    followed by the shape's QMD template, whose constant buffer address is patched per launch."""
    cb = round_up(shape.cb_size, 256)
    image = bytearray(cb + self.qmd_size)
    image[:CB0_DIMS_END] = shape.dims
    d = self._cb0_driver_offset
    image[d:d + len(self._cb0_driver)] = self._cb0_driver
    image[cb:cb + self.qmd_size] = shape.qmd
    # the template's upper dword holds other fields' bits above the address's: they are kept
    upper = int.from_bytes(shape.qmd[self._cb_byte + 4:self._cb_byte + 8], "little") & ~self._cb_upper_mask
    shape.launch_image = img = (bytes(shape.qmd), bytes(shape.dims), bytes(image), cb, cb + self._cb_byte, upper,
                                _fill_positions(shape.cmd))
    return img

  # ---- memory
  def _alloc(self, nbytes: int, host: bool = False, cpu_access: bool = False) -> Buffer:
    with self._open_lock():
      mem = self.session.alloc(nbytes, kind="host" if host else "vram", cpu_access=cpu_access)
    return Buffer(self, mem.va, nbytes, handle=mem, cpu_view=mem.cpu, kind="host" if host else "device")

  def _free_memory(self, buf: Buffer) -> None: self.session.free(buf.handle)

  # ---- another device in this GPU's address space (drivers/hcq/p2p.py: the GPU queue drives a NIC)
  def map_host(self, va: int, size: int, what: str) -> int:
    """Host memory another driver allocated, for this GPU's engines: not done here. hcq's NV GPU addresses are the
    CPU addresses of memory registered at them (below 1 TiB: semaphore and pushbuffer addresses are 40-bit), which
    another driver's memory is not; give that driver this GPU's host memory instead (p2p.QueueMemory)."""
    raise DeviceError(f"{self.name}: {what} at {va:#x}+{size:#x} is not memory of this GPU; make it from the GPU's "
                      f"host memory (drivers/hcq/p2p.py QueueMemory)")

  def dma_pages(self, buf: Buffer) -> list[int]:
    """The bus addresses of buf's 4 KiB pages for another device's DMA (a NIC memory region): host memory's pages
    (os.phys_addrs). VRAM has none here (a peer would need BAR1 mappings, which hcq does not make): DeviceError."""
    if buf.kind != "host":
      raise DeviceError(f"{self.name}: {buf!r} is VRAM; on {self.label} a peer reaches only host memory "
                        f"(alloc(host=True))")
    return list(self.os.phys_addrs(buf.va, round_up(buf.size, 0x1000)))

  def map_peer_bar(self, pci, index: int, size: int, offset: int, what: str) -> int:
    """size bytes from offset of memory BAR `index` of another PCI function (a drivers/system PCIDevice) in this
    GPU's address space, for the channels' semaphore releases (a NIC doorbell page): an RM OS descriptor of the
    BAR's I/O mapping (rm.py map_io). Returns the GPU address; unmapped when the device closes."""
    with self._open_lock(): return self.session.map_io(pci.resource_path(index), size, offset, what).va

  # ---- programs
  def _load(self, image: bytes, name: str | None):
    where = f"{self.name}: load"
    sass = None
    if image[:4] == b"\x7fELF":
      machine = int.from_bytes(image[0x12:0x14], "little") if len(image) >= 0x14 else None
      if machine != EM_CUDA:
        raise DeviceError(f"{where}: an ELF for machine {machine} is not a CUDA cubin (machine {EM_CUDA})")
      kernels = cubin_kernels(image, where)
      infos = {n: k for n, (k, _) in kernels.items()}
    elif is_ptx(image):
      infos = ptx_kernels(image.decode(errors="replace"), where)
      if not infos: raise DeviceError(f"{where}: the PTX module has no .entry kernels")
      kernels, sass = None, self._sass_of(bytes(image), infos, where)
    else: raise DeviceError(f"{where}: neither a cubin (ELF) nor PTX text")
    if name is None:
      if len(infos) > 1: raise DeviceError(f"{where}: the module has {len(infos)} kernels ({', '.join(infos)}); name one")
      name = next(iter(infos))
    if name not in infos: raise DeviceError(f"{where}: no kernel {name!r} in the module (it has {', '.join(infos)})")
    loaded = self._loaded_image(bytes(image), lambda: self._upload(image, infos, kernels, sass))
    with self._open_lock():
      if infos[name].no_sass: self._no_sass.setdefault(name, infos[name].no_sass)
      return NVProgram(self, infos[name], *loaded[name])

  def _sass_of(self, ptx: bytes, infos: dict, where: str) -> dict | None:
    """{kernel: SASS} of a PTX module compiled for this GPU, with each kernel's KernelInfo given the cubin's register
    count, parameter base and stack (its local memory: the larger of the stack and the PTX's .local arrays); None
    when no compiler is found or the text or its cubin is refused (the reason is kept for the launch's error)."""
    try:
      cubin = self._cubin_of(ptx)
      compiled = cubin_kernels(cubin, where)
    except DeviceError as e:
      for k in infos.values(): k.no_sass = str(e)
      return None
    out = {}
    for n, k in infos.items():
      hit = compiled.get(n)
      if hit is None:
        k.no_sass = f"the cubin has no kernel {n}"
        continue
      ck, code = hit
      k.registers, k.param_base = ck.registers, ck.param_base
      k.local, k.shared = max(k.local, ck.local), max(k.shared, ck.shared)
      out[n] = code
    return out

  def _upload(self, image: bytes, infos: dict, kernels, sass: dict | None = None) -> dict[str, tuple[int, int]]:
    """Put a module's code in VRAM; {kernel: (program address, code bytes from there)}."""
    if kernels is None:         # PTX: the text, a PTX_ENTRY record per kernel and its SASS where compiled
      sass = sass or {}
      size = round_up(len(image) + 768 * len(infos) + sum(len(c) + 256 for c in sass.values()) + 4096, 0x1000)
      mem = self.session.alloc(size, kind="vram")
      data, offsets = ptx_image(image, list(infos), mem.va, sass)
      sizes = {n: len(sass[n]) if n in sass else len(data) - o for n, o in offsets.items()}
    else:                       # SASS: each kernel's .text, 256-byte aligned, with 4 KB of slack for prefetches
      data, offsets, sizes = bytearray(), {}, {}
      for n, (_, code) in kernels.items():
        data += bytes(-len(data) % 256)
        offsets[n], sizes[n] = len(data), len(code)
        data += code
      data += bytes(4096)
      mem = self.session.alloc(round_up(len(data), 0x1000), kind="vram")
    self._copyin(Buffer(self, mem.va, mem.size, handle=mem, kind="code"), memoryview(bytes(data)), 0)
    return {n: (mem.va + o, sizes[n]) for n, o in offsets.items()}

  def _cubin_of(self, ptx: bytes) -> bytes:
    """The cubin of a PTX text, compiled once per text (ptxas takes far longer than a load of a loaded module).
    Two threads loading the same new text may both compile it; the first result stays."""
    cubin = self._cubins.get(ptx)
    if cubin is None: cubin = self._cubins.setdefault(ptx, self._compile_ptx(ptx))
    return cubin

  def _compile_ptx(self, image: bytes) -> bytes:
    from ...compiler.backend.cubin import PTXCompiler
    return compile_ptx(image, self.arch, PTXCompiler(self.config))

  def _compile(self, sink):
    from ...compiler import compile as compile_sink     # hcq's PTX backend
    return self.load(compile_sink(sink, self.arch).encode())

  def __repr__(self): return f"NVDevice({self.name})"
