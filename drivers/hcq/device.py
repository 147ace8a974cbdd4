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


class DeviceBase:
  """What every device hcq.open returns shares: a name for errors, the OS interface and options it was given, the
  timeout of its waits, close() (once; also closes the mock made for it) and the context manager."""
  name: str = "device"
  owned_os = None   # an OS interface made for this device alone (the mock hcq.open made): dev.close() closes it too

  def __init__(self, os, config, timeout_s: float | None = None):
    self.os, self.config = os, config
    self.timeout_s = timeout_s if timeout_s is not None else config.timeout_s
    self.closed = False

  def close(self) -> None:
    if self.closed: return
    try: self._close()
    finally:
      self.closed = True
      if self.owned_os is not None: self.owned_os.close()

  def __enter__(self): return self
  def __exit__(self, *exc): self.close()

  def _check_open(self) -> None:
    if self.closed: raise DeviceError(f"{self.name}: the device is closed")

  def _close(self) -> None: pass


class Device(DeviceBase):
  """The public API of DESIGN.md §4 (memory, copies, programs) over the vendor's _methods."""

  # ---- public API
  def alloc(self, nbytes: int, **opts) -> Buffer:
    """opts: host=True (host memory the device reads over the bus), cpu_access=True (device memory the CPU can map)."""
    self._check_open()
    nbytes = _integer(self, "alloc", "nbytes", nbytes)
    if nbytes <= 0: raise DeviceError(f"{self.name}: cannot allocate {nbytes} bytes (need a positive integer)")
    _check_alloc_options(self, opts)
    return self._alloc(nbytes, **opts)

  def free(self, buf: Buffer) -> None:
    _check_buffer(self, buf, "free")
    if buf.freed: raise DeviceError(f"{self.name}: {buf} freed twice")
    self._free(buf)
    buf.freed = True

  def copyin(self, buf: Buffer, data, offset: int = 0) -> None:
    # every argument is checked before the driver starts a copy: a bad one never leaves a copy half submitted
    self._check_open()
    _check_buffer(self, buf, "copyin")
    offset = _integer(self, "copyin", "offset", offset)
    src = _source_view(self, data)
    self._check_range(buf, offset, len(src), "copyin")
    if len(src): self._copyin(buf, src, offset)

  def copyout(self, buf: Buffer, size: int | None = None, offset: int = 0, *, dtype=None, into=None):
    """The bytes of buf from offset (size bytes; default: to its end). dtype=...: a numpy array of that type instead
    (size, when given, in bytes; default: as many whole elements as fit). into=ARRAY: fill that writable array (or
    buffer) with the bytes it holds and return it (size defaults to its size in bytes)."""
    self._check_open()
    _check_buffer(self, buf, "copyout")
    offset = _integer(self, "copyout", "offset", offset)
    if dtype is not None and into is not None:
      raise DeviceError(f"{self.name}: copyout: give dtype= or into=, not both (into's own type is used)")
    if into is not None:
      dst = _destination_view(self, into)
      size = len(dst) if size is None else _integer(self, "copyout", "size", size)
      if size != len(dst):
        raise DeviceError(f"{self.name}: copyout: into= holds {len(dst)} bytes, the copy is {size}")
      self._check_range(buf, offset, size, "copyout")
      if size: dst[:] = self._copyout(buf, size, offset)
      return into
    if dtype is not None:
      import numpy as np
      try: dt = np.dtype(dtype)
      except TypeError as e: raise DeviceError(f"{self.name}: copyout: dtype {dtype!r} is not a numpy type ({e})") from None
      if dt.hasobject or dt.itemsize == 0:
        raise DeviceError(f"{self.name}: copyout: dtype {dt} is not a type of numbers")
      if size is None: size = (buf.size - offset) // dt.itemsize * dt.itemsize
      size = _integer(self, "copyout", "size", size)
      if size % dt.itemsize:
        raise DeviceError(f"{self.name}: copyout: {size} bytes are not whole {dt} elements of {dt.itemsize} bytes")
      self._check_range(buf, offset, size, "copyout")
      return np.frombuffer(bytearray(self._copyout(buf, size, offset) if size else b""), dtype=dt)
    size = buf.size - offset if size is None else _integer(self, "copyout", "size", size)
    self._check_range(buf, offset, size, "copyout")
    return self._copyout(buf, size, offset) if size else b""

  def memset(self, buf: Buffer, value: int, size: int | None = None, offset: int = 0) -> None:
    """Set size bytes of buf from offset (default: to its end) to value (a byte, 0..255), as cudaMemset/hipMemset."""
    self._check_open()
    _check_buffer(self, buf, "memset")
    value, offset = _integer(self, "memset", "value", value), _integer(self, "memset", "offset", offset)
    if not 0 <= value <= 255: raise DeviceError(f"{self.name}: memset: value {value} is not a byte (0..255)")
    size = buf.size - offset if size is None else _integer(self, "memset", "size", size)
    self._check_range(buf, offset, size, "memset")
    chunk = 16 << 20   # bounded host memory for a large buffer
    pattern = memoryview(bytes([value]) * min(size, chunk))
    done = 0
    while done < size:
      n = min(chunk, size - done)
      self._copyin(buf, pattern[:n], offset + done)
      done += n

  def load(self, code_object, name: str | None = None):
    """The kernel `name` of the code object; without a name, its only kernel, or (several kernels) a Module that
    gives each: mod["name"] (the code object is loaded once and shared by its kernels)."""
    self._check_open()
    if isinstance(code_object, str):
      raise DeviceError(f"{self.name}: load() takes the code object's bytes; read the file first ({code_object!r})")
    if name is not None and not isinstance(name, str):
      raise DeviceError(f"{self.name}: load(): the kernel name must be a str or None, got {type(name).__name__}")
    image = _code_bytes(self, code_object)
    if name is None:
      names = self._kernel_names(image)
      if names is not None and len(names) > 1:
        from .program import Module
        mod = Module(self, image, names)
        mod[names[0]]   # loads the image now: a code object this device cannot run is refused by load(), not later
        return mod
    return self._load(image, name)

  def compile(self, sink):
    self._check_open()
    return self._compile(sink)

  def synchronize(self) -> None:
    self._check_open()
    self._synchronize()

  # ---- helpers
  def launch_cmdbuf(self, name: str, handle, grid, block, timed: bool):
    """The command buffer of a launch (Program.make_shape): None on a device without queues (the CPU);
    HCQDevice lowers the launch queue program."""
    return None

  def _check_range(self, buf: Buffer, offset: int, size: int, what: str) -> None:
    """buf (a Buffer of this device: _check_buffer) is live and [offset, offset + size) lies inside it."""
    if buf.freed: raise DeviceError(f"{self.name}: {what}: {buf} was freed")
    if offset < 0 or size < 0 or offset + size > buf.size:
      raise DeviceError(f"{self.name}: {what} of {size} bytes at offset {offset} is outside {buf}")

  # ---- for subclasses
  def _alloc(self, nbytes: int, **opts) -> Buffer: raise NotImplementedError
  def _free(self, buf: Buffer) -> None: raise NotImplementedError
  def _copyin(self, buf: Buffer, src: memoryview, offset: int) -> None: raise NotImplementedError
  def _copyout(self, buf: Buffer, size: int, offset: int) -> bytes: raise NotImplementedError
  def _load(self, image: bytes, name: str | None): raise NotImplementedError
  def _kernel_names(self, image: bytes) -> list[str] | None:
    """The kernels a code object holds, in its order; None when the driver cannot tell before loading (then
    load() without a name is the driver's _load(image, None))."""
    return None
  def _compile(self, sink): raise DeviceError(f"{self.name}: compiling UOp kernels is not supported on this device")
  def _synchronize(self) -> None: raise NotImplementedError


def _as_bytes_view(data) -> memoryview:
  if hasattr(data, "__array_interface__") and not isinstance(data, (bytes, bytearray, memoryview)):
    import numpy as np
    data = np.ascontiguousarray(data)
  mv = memoryview(data)
  if not mv.contiguous: mv = memoryview(mv.tobytes())
  return mv.cast("B") if mv.format != "B" or mv.ndim != 1 else mv


# ---- argument checks of the public API (each raises DeviceError naming the device, the call and the bad value)
# the options alloc() takes (DESIGN.md §4); a driver ignores those that mean nothing to it (all CPU memory is host)
ALLOC_OPTIONS = ("host", "cpu_access")


def _integer(dev: Device, call: str, what: str, v) -> int:
  """v as an int: any integral type (int, numpy integers: operator.index), never a bool, a float or a str."""
  import operator
  if not isinstance(v, bool):
    try: return operator.index(v)
    except TypeError: pass
  raise DeviceError(f"{dev.name}: {call}: {what} must be an integer, got {v!r} ({type(v).__name__})")


def _check_alloc_options(dev: Device, opts: dict) -> None:
  unknown = sorted(set(opts) - set(ALLOC_OPTIONS))
  if unknown:
    raise DeviceError(f"{dev.name}: alloc: unknown option {', '.join(unknown)} (options: {', '.join(ALLOC_OPTIONS)})")
  for k, v in opts.items():
    if not isinstance(v, bool): raise DeviceError(f"{dev.name}: alloc: option {k} must be True or False, got {v!r}")


def _check_buffer(dev: Device, buf, call: str) -> None:
  if not isinstance(buf, Buffer): raise DeviceError(f"{dev.name}: {call} needs a Buffer, got {type(buf).__name__}")
  if buf.device is not dev: raise DeviceError(f"{dev.name}: {call}: {buf} belongs to another device")


def _source_view(dev: Device, data) -> memoryview:
  """copyin's data as bytes: anything with the buffer protocol (bytes, bytearray, memoryview, numpy arrays)."""
  if isinstance(data, str): raise DeviceError(f"{dev.name}: copyin takes bytes or an array, not a str ({data[:32]!r})")
  if getattr(getattr(data, "dtype", None), "hasobject", False):   # its bytes would be the CPU's object pointers
    raise DeviceError(f"{dev.name}: copyin takes an array of numbers, not of Python objects (dtype {data.dtype})")
  try: return _as_bytes_view(data)
  except (TypeError, ValueError) as e:
    raise DeviceError(f"{dev.name}: copyin takes bytes or an array, got {type(data).__name__} ({e})") from None


def _destination_view(dev: Device, into) -> memoryview:
  """copyout's into= as writable bytes (a numpy array, a bytearray, a writable memoryview)."""
  try: mv = memoryview(into)
  except TypeError:
    raise DeviceError(f"{dev.name}: copyout: into= must be a writable array or buffer, got {type(into).__name__}") from None
  if mv.readonly: raise DeviceError(f"{dev.name}: copyout: into= is read-only")
  if not mv.contiguous: raise DeviceError(f"{dev.name}: copyout: into= must be contiguous")
  return mv.cast("B") if mv.format != "B" or mv.ndim != 1 else mv


def _code_bytes(dev: Device, code_object) -> bytes:
  try: return bytes(memoryview(code_object))
  except TypeError:
    raise DeviceError(f"{dev.name}: load() takes the code object's bytes, got {type(code_object).__name__}") from None
