"""KGSLSession: an Adreno GPU through Qualcomm's kernel driver, /dev/kgsl-3d0, reached only through the OS interface.

What it offers QCOMDevice: the device's properties (chip id -> "a630"), GPU memory objects (GPUMEM_ALLOC_ID, mapped
into the process by mmap of the kgsl file at id << 12, with GPU address == CPU address: KGSL_MEMFLAGS_USE_CPU_MAP),
a draw context, submission of an indirect buffer by ioctl (GPU_COMMAND, which returns the context's next timestamp),
waits for a timestamp bounded by a timeout (DEVICE_WAITTIMESTAMP_CTXTID), and the context's fault status
(GETPROPERTY GPU_RESET_STAT / CONTEXT_PROPERTY faults) turned into hcq.GPUFault.

Bindings: hcq.autogen.qcom.msm_kgsl (Mesa 25.0.7's msm_kgsl.h, checked against gcc)."""
from __future__ import annotations

import ctypes
import dataclasses
import errno
import os as _os
import re

from ...autogen.qcom import msm_kgsl as K
from ...errors import DeviceError, GPUFault, OSCallError
from ..hcq.alloc import round_up

PATH = "/dev/kgsl-3d0"
PAGE = 0x1000
# compute context: no GMEM, a preamble-capable context that does not try to recover a faulting submission (a fault
# invalidates the context and later waits and submissions on it say so), medium priority, fine-grain preemption
CONTEXT_FLAGS = (K.KGSL_CONTEXT_NO_GMEM_ALLOC | K.KGSL_CONTEXT_PREAMBLE | K.KGSL_CONTEXT_NO_FAULT_TOLERANCE |
                 K.KGSL_CONTEXT_INVALIDATE_ON_FAULT | 8 << K.KGSL_CONTEXT_PRIORITY_SHIFT |
                 K.KGSL_CONTEXT_PREEMPT_STYLE_FINEGRAIN << K.KGSL_CONTEXT_PREEMPT_STYLE_SHIFT |
                 K.KGSL_CONTEXT_TYPE_CL << K.KGSL_CONTEXT_TYPE_SHIFT)
RESET_STATUS = {K.KGSL_CTX_STAT_GUILTY_CONTEXT_RESET_EXT: "the GPU was reset: this context's work faulted",
                K.KGSL_CTX_STAT_INNOCENT_CONTEXT_RESET_EXT: "the GPU was reset for another context's fault",
                K.KGSL_CTX_STAT_UNKNOWN_CONTEXT_RESET_EXT: "the GPU was reset (cause unknown)"}


@dataclasses.dataclass
class Mem:
  id: int
  va: int
  size: int
  cpu: memoryview
  mmapsize: int = 0               # what was mapped: KGSL's mmapsize (the object's footprint, maybe with a guard page)


def chip_info(chip_id: int) -> tuple[str, int, int]:
  """(name, gpu id, generation) of a KGSL chip id, from Mesa's device table (hcq.autogen.qcom.devices, looked up as
  Mesa's fd_dev_info_raw does): 0x06030001 -> ("a630", 630, 6), 0x07030001 -> ("a730", 730, 7), 0x43050a01 ->
  ("a740", 740, 7) (a7xx chip ids need not spell the gpu id: a740's core byte is 0x43). A chip id Mesa does not know
  is read as core.major.minor bytes ("a" + digits) with generation = core."""
  from ...autogen.qcom.devices import DEVICES
  d = DEVICES.lookup(chip_id)
  core, major, minor = chip_id >> 24 & 0xFF, chip_id >> 16 & 0xFF, chip_id >> 8 & 0xFF
  if d is None: return f"a{core}{major}{minor}", core * 100 + major * 10 + minor, core
  gpu_id = d.gpu_id or (int(d.name[2:]) if d.name[:2] == "FD" and d.name[2:].isdigit() else 0)
  return d.marketing, gpu_id, d.generation


def _explanation(err) -> str:
  """The cause a failed KGSL call's file gave (an ioctl error's text after its request number), without the
  errno's words: "" when it gave none (the kernel's KGSL gives none; the mock explains its refusals)."""
  if err is None: return ""
  text = str(err)
  m = re.search(r"\(request 0x[0-9a-f]+; (.*)\)$", text, re.S)
  if not m: return ""
  why = re.sub(r"^IOCTL_KGSL_\w+: ", "", m.group(1))
  inner = re.match(r"^context \d+ faulted \((.*)\)$", why, re.S)
  return inner.group(1) if inner else why


class KGSLSession:
  name = "KGSL"

  def __init__(self, osi, index: int, config, label: str | None = None):
    self.os, self.config = osi, config
    self.label = label or f"KGSL+QCOM:{index}"
    if index != 0: raise DeviceError(f"{self.label}: KGSL has one GPU, {PATH} (index 0)")
    try: self.fd = osi.open(PATH, _os.O_RDWR)
    except OSCallError as e: raise DeviceError(f"{self.label}: cannot open {PATH} ({e})") from None
    self._mems: dict[int, Mem] = {}
    self.ctx = None
    self._submit_structs = None     # (kgsl_command_object, kgsl_gpu_command) of submit(), made at the first one
    try: self._open()
    except BaseException as e:
      try: self.close()
      except (DeviceError, OSError) as cleanup: e.add_note(f"{self.label}: cleaning up after the failed open failed too: {cleanup}")
      raise

  def _open(self) -> None:
    info = self.getproperty(K.KGSL_PROP_DEVICE_INFO, K.struct_kgsl_devinfo())
    self.chip_id, self.gmem_size = info.chip_id, info.gmem_sizebytes
    self.arch, self.gpu_id, self.generation = chip_info(info.chip_id)
    if self.generation != 6:
      raise DeviceError(f"{self.label}: chip {info.chip_id:#010x} ({self.arch}, Adreno {self.generation}xx) is not an "
                        "Adreno 6xx, which hcq drives")
    self.label = f"{self.label} ({self.arch}, chip {info.chip_id:#010x})"
    self.ctx = self._ioctl(K.IOCTL_KGSL_DRAWCTXT_CREATE, flags=CONTEXT_FLAGS).drawctxt_id

  def _ioctl(self, ioctl, **fields):
    try: return ioctl(self.fd, **fields)
    except OSCallError as e: raise DeviceError(f"{self.label}: {e}") from None

  def getproperty(self, prop: int, value):
    K.IOCTL_KGSL_DEVICE_GETPROPERTY(self.fd, type=prop, value=ctypes.addressof(value), sizebytes=ctypes.sizeof(value))
    return value

  # ---- memory
  def alloc(self, size: int, uncached: bool = False) -> Mem:
    """A GPU memory object of at least size bytes, mapped at the same address for the CPU and the GPU."""
    size = round_up(max(size, 1), PAGE)
    flags = K.KGSL_MEMFLAGS_USE_CPU_MAP | 12 << K.KGSL_MEMALIGN_SHIFT
    if uncached: flags |= K.KGSL_CACHEMODE_UNCACHED << K.KGSL_CACHEMODE_SHIFT
    try: obj = K.IOCTL_KGSL_GPUMEM_ALLOC_ID(self.fd, size=size, flags=flags)
    except OSCallError as e: raise DeviceError(f"{self.label}: allocating {size:#x} bytes failed: {e}") from None
    # with USE_CPU_MAP the object gets its GPU address when it is mapped: the CPU address
    try: va = self.fd.mmap(obj.mmapsize, obj.id << 12)
    except (OSCallError, OSError) as e:
      self._ioctl(K.IOCTL_KGSL_GPUMEM_FREE_ID, id=obj.id)
      raise DeviceError(f"{self.label}: mapping memory object {obj.id} ({size:#x} bytes) failed: {e}") from None
    mem = Mem(obj.id, va, size, self.os.memview(va, size), obj.mmapsize)
    self._mems[va] = mem
    return mem

  def free(self, mem: Mem) -> None:
    if self._mems.pop(mem.va, None) is None: raise DeviceError(f"{self.label}: free of unknown memory at {mem.va:#x}")
    mem.cpu = None
    self.os.free_anon(mem.va, mem.mmapsize or mem.size)     # unmap what mmap mapped: mmapsize, not the size
    self._ioctl(K.IOCTL_KGSL_GPUMEM_FREE_ID, id=mem.id)

  # ---- submission and completion
  def submit(self, ib_va: int, ib_bytes: int) -> int:
    """Run the indirect buffer on the context; returns the KGSL timestamp the submission retires with. The command
    object and the ioctl's struct are made once and refilled (the caller holds the device lock)."""
    made = self._submit_structs
    if made is None:
      cmd = K.struct_kgsl_command_object(flags=K.KGSL_CMDLIST_IB)
      made = self._submit_structs = (cmd, K.struct_kgsl_gpu_command(context_id=self.ctx, cmdlist=ctypes.addressof(cmd),
                                                                    cmdsize=ctypes.sizeof(cmd), numcmds=1))
    cmd, args = made
    cmd.gpuaddr, cmd.size = ib_va, ib_bytes
    args.timestamp = 0
    try: K.IOCTL_KGSL_GPU_COMMAND(self.fd, args)
    except OSCallError as e:
      self.check_context("IOCTL_KGSL_GPU_COMMAND", e)
      raise DeviceError(f"{self.label}: submitting {ib_bytes} bytes at {ib_va:#x} on context {self.ctx} failed: {e}") from None
    return args.timestamp

  def wait(self, timestamp: int, timeout_ms: int) -> bool:
    """Block until the context retires timestamp or timeout_ms pass (True: retired). A fault of the context raises
    GPUFault naming the ioctl, the context and the timestamp."""
    try:
      K.IOCTL_KGSL_DEVICE_WAITTIMESTAMP_CTXTID(self.fd, context_id=self.ctx, timestamp=timestamp, timeout=timeout_ms)
      return True
    except OSCallError as e:
      if e.errno == errno.ETIMEDOUT: return False
      self.check_context(f"IOCTL_KGSL_DEVICE_WAITTIMESTAMP_CTXTID for timestamp {timestamp}", e)
      raise DeviceError(f"{self.label}: waiting for timestamp {timestamp} on context {self.ctx} failed: {e}") from None

  def check_context(self, what: str = "", err: OSCallError | None = None) -> None:
    """Raise GPUFault when KGSL reports the context reset or faulted. The message leads with the cause (the
    explanation the failed call `what` came back with, when the file gave one) and ends with the reset status and
    the call's errno, so that it never starts with "[Errno 35] Resource deadlock avoided"."""
    stat = ctypes.c_uint32(self.ctx)         # in: the context id; out: its reset status (read and cleared)
    try: self.getproperty(K.KGSL_PROP_GPU_RESET_STAT, stat)
    except OSCallError: return
    fault = K.struct_kgsl_context_property_fault()
    prop = K.struct_kgsl_context_property(data=ctypes.addressof(fault), size=ctypes.sizeof(fault),
                                          type=K.KGSL_CONTEXT_PROP_FAULTS, contextid=self.ctx)
    try: self.getproperty(K.KGSL_PROP_CONTEXT_PROPERTY, prop)
    except OSCallError: fault.faults = 0
    if stat.value == K.KGSL_CTX_STAT_NO_ERROR and not fault.faults: return
    reset = RESET_STATUS.get(stat.value, f"reset status {stat.value}")
    at = f" at timestamp {fault.timestamp}" if fault.faults else ""
    why = _explanation(err)
    name = "EDEADLK" if err is not None and err.errno == errno.EDEADLK else errno.errorcode.get(getattr(err, "errno", 0) or 0)
    call = f"; {what} returned {name}" if err is not None and err.errno else \
      (f"; {what}" if what else "")
    raise GPUFault(f"{self.label}: context {self.ctx} faulted{at}" + (f": {why}" if why else "") +
                   f" ({fault.faults} fault(s); {reset}{call})", kind="context fault")

  def close(self) -> None:
    errors = []
    for mem in list(self._mems.values()):
      try: self.free(mem)
      except (OSCallError, DeviceError, OSError) as e: errors.append(e)
    if self.ctx is not None:
      try: K.IOCTL_KGSL_DRAWCTXT_DESTROY(self.fd, drawctxt_id=self.ctx)
      except (OSCallError, OSError) as e: errors.append(e)
      self.ctx = None
    self.fd.close()
    if errors: raise DeviceError(f"{self.label}: closing failed: {errors[0]}" + (f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""))
