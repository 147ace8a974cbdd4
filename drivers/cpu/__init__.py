"""The CPU device: `hcq.open("CPU")`. Memory is host memory; kernels are UOp kernels compiled by the C backend
(or shared objects it built) and run by its work-group runner (threads, shared LOCAL memory, real barriers).

Where the OS is touched: building and dlopen-ing the shared object happen in the compiler's C backend (a build step,
as for every backend), so this driver needs nothing from the OS interface; buffers are ctypes arrays that the device
owns.
"""
from __future__ import annotations

import ctypes

from ...compiler import compile as compile_kernel
from ...compiler.backend.c import CProgram, load_shared_object
from ...compiler.ir import CompileError
from ...errors import DeviceError
from ..hcq import Buffer, Device

_ALIGN = 64


class CPUProgram:
  """A loaded kernel: prog(*args, global_size=, local_size=, wait=True) -> seconds."""
  def __init__(self, device: "CPUDevice", prog: CProgram):
    self.device, self.prog, self.name = device, prog, prog.name

  def __call__(self, *args, global_size=None, local_size=None, wait: bool = True) -> float | None:
    self.device._check_open()
    for a in args:
      if isinstance(a, Buffer) and (a.device is not self.device or a.freed):
        raise DeviceError(f"{self.device.name}: kernel {self.name}: {a} is {'freed' if a.freed else 'on another device'}")
    try: t = self.prog(*args, global_size=global_size, local_size=local_size)
    except CompileError as e: raise DeviceError(f"{self.device.name}: {e}") from e
    return t if wait else None


class CPUDevice(Device):
  name = "CPU"

  def __init__(self, os, config, cc: str = "cc"):
    super().__init__(os, config)
    self.cc = cc
    self._arrays: dict[int, ctypes.Array] = {}

  def _alloc(self, nbytes: int, **opts) -> Buffer:
    raw = (ctypes.c_char * (nbytes + _ALIGN))()
    va = (ctypes.addressof(raw) + _ALIGN - 1) // _ALIGN * _ALIGN
    buf = Buffer(self, va, nbytes, handle=raw, cpu_view=memoryview((ctypes.c_char * nbytes).from_address(va)).cast("B"),
                 kind="host")
    self._arrays[va] = raw
    return buf

  def _free(self, buf: Buffer) -> None:
    self._arrays.pop(buf.va, None)
    buf.cpu_view = None

  def _copyin(self, buf: Buffer, src: memoryview, offset: int) -> None:
    ctypes.memmove(buf.va + offset, (ctypes.c_char * len(src)).from_buffer_copy(src), len(src))

  def _copyout(self, buf: Buffer, size: int, offset: int) -> bytes:
    return ctypes.string_at(buf.va + offset, size)

  def _load(self, image: bytes, name: str | None) -> CPUProgram:
    try: prog = CProgram(load_shared_object(image))
    except (CompileError, OSError) as e: raise DeviceError(f"{self.name}: cannot load the shared object: {e}") from e
    if name is not None and name != prog.name:
      raise DeviceError(f"{self.name}: the shared object holds kernel {prog.name!r}, not {name!r}")
    return CPUProgram(self, prog)

  def _compile(self, sink) -> CPUProgram:
    art = compile_kernel(sink, "c")
    return CPUProgram(self, CProgram.from_artifact(art, self.cc))

  def _synchronize(self) -> None: pass   # launches run to completion before they return

  def _close(self) -> None:
    self._arrays.clear()


def open_device(iface: str, index: int, os, config) -> CPUDevice:
  if index != 0: raise DeviceError(f"CPU:{index}: there is one CPU device (CPU:0)")
  return CPUDevice(os, config)
