"""CPUDevice: host memory and kernels compiled by the C backend, run by its work-group runner (see __init__.py)."""
from __future__ import annotations

import ctypes
import threading

from ...compiler import compile as compile_kernel
from ...compiler.backend.c import CProgram, load_shared_object
from ...compiler.ir import CompileError
from ...errors import DeviceError, Timeout
from ..hcq import Buffer, Device, Program

_ALIGN = 64


# ELF e_machine values (include/uapi/linux/elf-em.h; EM_AMDGPU 224 from glibc's elf.h) by platform.machine()
_EM_OF_MACHINE = {"x86_64": 62, "aarch64": 183, "arm64": 183, "riscv64": 243, "ppc64le": 21, "ppc64": 21, "s390x": 22,
                  "loongarch64": 258}
_EM_NAMES = {62: "x86-64", 183: "AArch64", 243: "RISC-V", 21: "PowerPC64", 22: "S/390", 258: "LoongArch",
             224: "AMDGPU (a GPU code object)", 190: "NVIDIA CUDA"}


def _not_a_host_shared_object(head: bytes) -> str | None:
  """Why an image's ELF header (its first 20 bytes: e_ident, e_type, e_machine) is no shared object for this CPU,
  or None. dlopen's own answer for a foreign ELF can be as misleading as "cannot open shared object file"."""
  import platform
  import struct
  if len(head) < 20 or head[:4] != b"\x7fELF": return "an image that is not an ELF file (no \\x7fELF magic)"
  little = head[5] == 1                                  # e_ident[EI_DATA]: ELFDATA2LSB
  e_type, e_machine = struct.unpack("<HH" if little else ">HH", head[16:20])
  want = _EM_OF_MACHINE.get(platform.machine())
  if want is not None and e_machine != want:
    return (f"an ELF file for {_EM_NAMES.get(e_machine, f'e_machine {e_machine}')}, not for this "
            f"{platform.machine()} CPU")
  if e_type != 3: return f"an ELF file of type {e_type}, not a shared object (ET_DYN, 3)"
  return None


class CArgs:
  """The CPU's ArgLayout (drivers/hcq/args.py): a C kernel's slots, as the C backend packs them (u64 words: buffer
  addresses, integers, float bits); there is no group-shared memory given at launch and nothing hidden."""
  dynamic_shared = False

  def __init__(self, prog: CProgram):
    self.prog = prog
    self.segment_size = 8 * (max((p[0] for p in prog.art.params), default=-1) + 1)

  def shared_layout(self, args): return [], 0
  def hidden_values(self, grid, block, extra): return b""

  def check_and_pack(self, args: tuple, buffer_type: type, device):
    """The packed slots (a ctypes array of u64, what the C launch takes), or DeviceError naming the slot."""
    name = self.prog.name
    for (slot, kind, *_), a in zip(self.prog.art.params, args):
      if kind == "buffer" and not isinstance(a, buffer_type):
        raise DeviceError(f"{device.name}: kernel {name}: slot {slot} takes a Buffer, got {type(a).__name__}")
      if isinstance(a, Buffer) and (a.device is not device or a.freed):
        raise DeviceError(f"{device.name}: kernel {name}: {a} is {'freed' if a.freed else 'on another device'}")
    try: return self.prog.pack_args(args)
    except CompileError as e: raise DeviceError(f"{device.name}: {e}") from e


class CPUProgram(Program):
  """A loaded kernel on the runtime's Program contract (drivers/hcq/program.py), as on the GPUs:
  prog(*args, global_size=(1, 1, 1), local_size=(1, 1, 1), wait=False) -> seconds with wait=True, else None; the sizes
  checked by check_launch before anything runs (a kernel built for a work-group size takes only that one), and the
  work-group count against what the kernel was built for.

  A launch runs on a worker thread (the kernel's own threads start from there), so that waiting for it has a
  timeout: the device's timeout_s. wait=False returns at once; dev.synchronize() waits for every launch. Launches run
  in order, one after the other, as on a GPU queue; copies and frees wait for the launches before them."""

  def __init__(self, device: "CPUDevice", prog: CProgram):
    art = prog.art
    super().__init__(device, prog.name, CArgs(prog), 1024)
    self.prog = prog
    # a kernel built for a local size (its local ids folded in, LOCAL arrays sized for it) takes only that one
    self.required_block = tuple(art.local_size) if tuple(art.local_size) != (1, 1, 1) else None

  def shape_data(self, shape) -> None:
    try: self.prog.check_dims(shape.grid, shape.block)
    except CompileError as e: raise DeviceError(f"{self.device.name}: {e}") from None


class _Launch:
  def __init__(self, prog: CPUProgram, words, global_size, local_size, after: "_Launch | None"):
    """after: the launch before this one, which this one waits for (launches run in order)."""
    self.prog, self.seconds, self.error, self.after = prog, None, None, after
    self.thread = threading.Thread(target=self._run, args=(words, global_size, local_size), daemon=True,
                                   name=f"hcq-cpu-{prog.name}")

  def _run(self, words, global_size, local_size):
    if self.after is not None:
      self.after.thread.join()
      self.after = None
    try: self.seconds = self.prog.prog.launch(words, global_size, local_size)
    except Exception as e: self.error = e   # noqa: BLE001 - any failure is re-raised by the waiting thread


class CPUDevice(Device):
  name = "CPU"
  buffer_type = Buffer

  def __init__(self, os, config, cc: str = "cc"):
    super().__init__(os, config)
    self.cc = cc
    self.cache_dir = config.cache_dir   # where the C backend keeps built and loaded shared objects (private)
    self._arrays: dict[int, ctypes.Array] = {}
    self._launches: list[_Launch] = []
    self.lock = threading.RLock()   # launches, copies and frees from several threads: one at a time
    self._running_on = False        # a kernel outlived its wait: its buffers must stay allocated

  def launch(self, prog: CPUProgram, shape, words, timed: bool) -> float | None:
    """One launch (Program.__call__ checked its arguments and sizes), after the launches before it."""
    with self.lock:
      self._check_open()
      launch = _Launch(prog, words, shape.grid, shape.block, self._launches[-1] if self._launches else None)
      self._launches.append(launch)
      launch.thread.start()
    if not timed: return None
    self._wait(launch)
    return launch.seconds

  def _wait(self, launch: _Launch) -> None:
    with self.lock:
      launch.thread.join(self.timeout_s)
      if launch.thread.is_alive():
        # the kernel still runs in this process and may write to any of its buffers: nothing is freed from now on
        self.closed = self._running_on = True
        raise Timeout(f"{self.name}: kernel {launch.prog.name} to finish (the device is closed)", timeout_s=self.timeout_s)
      if launch in self._launches: self._launches.remove(launch)
      if launch.error is not None: raise DeviceError(f"{self.name}: {launch.error}") from launch.error

  def _alloc(self, nbytes: int, **opts) -> Buffer:
    raw = (ctypes.c_char * (nbytes + _ALIGN))()
    va = (ctypes.addressof(raw) + _ALIGN - 1) // _ALIGN * _ALIGN
    buf = Buffer(self, va, nbytes, handle=raw, cpu_view=memoryview((ctypes.c_char * nbytes).from_address(va)).cast("B"),
                 kind="host")
    self._arrays[va] = raw
    return buf

  def _free(self, buf: Buffer) -> None:
    with self.lock:
      self._synchronize()          # a kernel launched before may still use it
      self._arrays.pop(buf.va, None)
      buf.cpu_view = None

  def _copyin(self, buf: Buffer, src: memoryview, offset: int) -> None:
    with self.lock:
      self._synchronize()          # in order with the launches before it, as a copy on a GPU queue
      ctypes.memmove(buf.va + offset, (ctypes.c_char * len(src)).from_buffer_copy(src), len(src))

  def _copyout(self, buf: Buffer, size: int, offset: int) -> bytes:
    with self.lock:
      self._synchronize()
      return ctypes.string_at(buf.va + offset, size)

  def _load(self, image: bytes, name: str | None) -> CPUProgram:
    why = _not_a_host_shared_object(bytes(image[:20]))
    if why: raise DeviceError(f"{self.name}: cannot load {why}: the CPU takes a shared object its C backend built "
                              f"(dev.compile, or `hcq kernels --device CPU`)")
    try: prog = CProgram(load_shared_object(image, self.cache_dir))
    except (CompileError, OSError) as e: raise DeviceError(f"{self.name}: cannot load the shared object: {e}") from e
    if name is not None and name != prog.name:
      raise DeviceError(f"{self.name}: the shared object holds kernel {prog.name!r}, not {name!r}")
    return CPUProgram(self, prog)

  def _compile(self, sink) -> CPUProgram:
    art = compile_kernel(sink, "c")
    return CPUProgram(self, CProgram.from_artifact(art, self.cache_dir, self.cc))

  def _synchronize(self) -> None:
    with self.lock:
      for launch in list(self._launches): self._wait(launch)

  def _close(self) -> None:
    with self.lock:
      try:
        if not self._running_on: self._synchronize()
      finally:
        if not self._running_on: self._arrays.clear()   # a kernel still running keeps its buffers (a leak, not a crash)


