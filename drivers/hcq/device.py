"""The generic device of the runtime: buffers, a timeline, the public API of DESIGN.md §4.

A vendor driver subclasses Device and implements the _methods; the public methods check their arguments and name
the device in every error."""
from __future__ import annotations

from ...errors import DeviceError
from .signal import Signal


class Buffer:
  """Device memory: .va (device address; == the CPU address where the CPU can see it), .size."""
  __slots__ = ("va", "size", "device", "handle", "cpu_view", "kind", "freed", "__weakref__")

  def __init__(self, device, va: int, size: int, handle=None, cpu_view: memoryview | None = None, kind: str = "device"):
    self.device, self.va, self.size, self.handle, self.cpu_view, self.kind = device, va, size, handle, cpu_view, kind
    self.freed = False

  def __repr__(self): return f"Buffer({self.kind}, va={self.va:#x}, size={self.size:#x})"


class Timeline:
  """A device's timeline: a signal the device bumps after each submission, and the last value handed out."""

  def __init__(self, signal: Signal):
    self.signal, self.value = signal, 0

  def next(self) -> int:
    self.value += 1
    return self.value


class Device:
  name: str = "device"
  owned_os = None   # an OS interface made for this device alone (the mock hcq.open made): dev.close() closes it too

  def __init__(self, os, config):
    self.os, self.config = os, config
    self.timeout_s = config.timeout_s
    self.closed = False

  # ---- public API
  def alloc(self, nbytes: int, **opts) -> Buffer:
    self._check_open()
    if not isinstance(nbytes, int) or nbytes <= 0:
      raise DeviceError(f"{self.name}: cannot allocate {nbytes!r} bytes (need a positive integer)")
    return self._alloc(nbytes, **opts)

  def free(self, buf: Buffer) -> None:
    if buf.freed: raise DeviceError(f"{self.name}: {buf} freed twice")
    self._free(buf)
    buf.freed = True

  def copyin(self, buf: Buffer, data, offset: int = 0) -> None:
    self._check_open()
    src = _as_bytes_view(data)
    self._check_range(buf, offset, len(src), "copyin")
    if len(src): self._copyin(buf, src, offset)

  def copyout(self, buf: Buffer, size: int | None = None, offset: int = 0) -> bytes:
    self._check_open()
    size = buf.size - offset if size is None else size
    self._check_range(buf, offset, size, "copyout")
    return self._copyout(buf, size, offset) if size else b""

  def load(self, code_object, name: str | None = None):
    self._check_open()
    if isinstance(code_object, str):
      raise DeviceError(f"{self.name}: load() takes the code object's bytes; read the file first ({code_object!r})")
    return self._load(bytes(code_object), name)

  def compile(self, sink):
    self._check_open()
    return self._compile(sink)

  def synchronize(self) -> None:
    self._check_open()
    self._synchronize()

  def close(self) -> None:
    if self.closed: return
    try: self._close()
    finally:
      self.closed = True
      if self.owned_os is not None: self.owned_os.close()

  def __enter__(self): return self
  def __exit__(self, *exc): self.close()

  # ---- helpers
  def _check_open(self) -> None:
    if self.closed: raise DeviceError(f"{self.name}: the device is closed")

  def _check_range(self, buf: Buffer, offset: int, size: int, what: str) -> None:
    if not isinstance(buf, Buffer): raise DeviceError(f"{self.name}: {what} needs a Buffer, got {type(buf).__name__}")
    if buf.device is not self: raise DeviceError(f"{self.name}: {what}: {buf} belongs to another device")
    if buf.freed: raise DeviceError(f"{self.name}: {what}: {buf} was freed")
    if offset < 0 or size < 0 or offset + size > buf.size:
      raise DeviceError(f"{self.name}: {what} of {size} bytes at offset {offset} is outside {buf}")

  # ---- for subclasses
  def _alloc(self, nbytes: int, **opts) -> Buffer: raise NotImplementedError
  def _free(self, buf: Buffer) -> None: raise NotImplementedError
  def _copyin(self, buf: Buffer, src: memoryview, offset: int) -> None: raise NotImplementedError
  def _copyout(self, buf: Buffer, size: int, offset: int) -> bytes: raise NotImplementedError
  def _load(self, image: bytes, name: str | None): raise NotImplementedError
  def _compile(self, sink): raise DeviceError(f"{self.name}: compiling UOp kernels is not supported on this device")
  def _synchronize(self) -> None: raise NotImplementedError
  def _close(self) -> None: pass


def _as_bytes_view(data) -> memoryview:
  if hasattr(data, "__array_interface__") and not isinstance(data, (bytes, bytearray, memoryview)):
    import numpy as np
    data = np.ascontiguousarray(data)
  mv = memoryview(data)
  if not mv.contiguous: mv = memoryview(mv.tobytes())
  return mv.cast("B") if mv.format != "B" or mv.ndim != 1 else mv
