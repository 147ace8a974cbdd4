"""What generated modules need at run time: struct helpers, the Ioctl object, register descriptions.

Importable without libclang (generated modules import only this and ctypes). It reaches the OS only through the
object it is handed: `IOCTL(file, ...)` calls `file.ioctl(request, struct)` (the OS interface's open files and the
mock's). A plain int fd is accepted for scripts and goes through fcntl in autogen/fdioctl.py.
"""
from __future__ import annotations

import ctypes
from typing import Any

from hcq.errors import OSCallError
from ioctl_opt import IOC, IOC_NONE, IOC_READ, IOC_WRITE  # noqa: F401  (re-exported for generated modules)


class IoctlError(OSCallError):
  """An ioctl failed: names the ioctl, the file and the errno (an hcq DeviceError, like every OS call failure)."""

  def __init__(self, name: str, request: int, errno: int | None, target: str = "", cause: str = ""):
    self.name, self.request = name, request
    super().__init__(f"ioctl {name}", target or "<fd>", errno, f"request {request:#x}" + (f"; {cause}" if cause else ""))


def _c_value(ftype, value):
  """Convert a python value for a field of ctypes type ftype (bytes for char arrays, lists for arrays)."""
  if isinstance(ftype, type) and issubclass(ftype, ctypes.Array) and not isinstance(value, (bytes, str)):
    arr = ftype()
    for i, v in enumerate(value): arr[i] = _c_value(ftype._type_, v)
    return arr
  if isinstance(ftype, type) and issubclass(ftype, (ctypes.Structure, ctypes.Union)) and isinstance(value, dict):
    return init(ftype, **value)
  return value


def _field_type(cls, name):
  if name in getattr(cls, "_bitfields_", ()): return int
  for f in cls._fields_:
    if f[0] == name: return f[1]
  for anon in getattr(cls, "_anonymous_", ()):
    sub = _field_type(dict((f[0], f[1]) for f in cls._fields_)[anon], name)
    if sub is not None: return sub
  return None


def init(cls, **fields):
  """An instance of the struct/union cls with the given fields set (names as in C, anonymous members flattened)."""
  obj = cls()
  for k, v in fields.items():
    ft = _field_type(cls, k)
    if ft is None: raise AttributeError(f"{cls.__name__} has no field {k!r}")
    setattr(obj, k, _c_value(ft, v))
  return obj


def as_dict(obj) -> dict[str, Any]:
  """The fields of a struct/union instance as a dict (nested records as dicts, arrays as lists)."""
  out = {}
  for f in obj._fields_:
    if f[0] == "_align_" or f[0].startswith("_pad"): continue   # alignment / bitfield-storage members
    v = getattr(obj, f[0])
    if isinstance(v, (ctypes.Structure, ctypes.Union)): v = as_dict(v)
    elif isinstance(v, ctypes.Array): v = [as_dict(x) if isinstance(x, (ctypes.Structure, ctypes.Union)) else x for x in v]
    out[f[0]] = v
  for name in getattr(type(obj), "_bitfields_", ()): out[name] = getattr(obj, name)
  return out


def struct_repr(self) -> str:
  return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in as_dict(self).items())})"


class Struct(ctypes.Structure):
  __repr__ = struct_repr


class Union(ctypes.Union):
  __repr__ = struct_repr


class BitField:
  """A bitfield the generator lays out itself (where ctypes' placement differs from C's, e.g. a 40-bit field of
  unsigned long long after a char bitfield). Like ctypes' own field descriptors: .offset is the byte of its first
  bit and .size is (width << 16) | (first bit within that byte)."""

  def __init__(self, name: str, bit_offset: int, width: int, signed: bool):
    self.name, self.bit_offset, self.width, self.signed = name, bit_offset, width, signed
    self.offset, self.size = bit_offset // 8, (width << 16) | (bit_offset % 8)
    self._nbytes = (bit_offset % 8 + width + 7) // 8
    self._mask = (1 << width) - 1

  def __repr__(self): return f"<BitField {self.name} bits {self.bit_offset}..{self.bit_offset + self.width - 1}>"

  def __get__(self, obj, cls=None):
    if obj is None: return self
    raw = int.from_bytes(ctypes.string_at(ctypes.addressof(obj) + self.offset, self._nbytes), "little")
    v = (raw >> (self.bit_offset % 8)) & self._mask
    if self.signed and v >> (self.width - 1): v -= 1 << self.width
    return v

  def __set__(self, obj, value):
    addr = ctypes.addressof(obj) + self.offset
    raw = int.from_bytes(ctypes.string_at(addr, self._nbytes), "little")
    shift = self.bit_offset % 8
    raw = (raw & ~(self._mask << shift)) | ((int(value) & self._mask) << shift)   # C keeps the low bits too
    ctypes.memmove(addr, raw.to_bytes(self._nbytes, "little"), self._nbytes)


def add_bitfields(cls, bits):
  """Attach BitField descriptors (name, bit offset, width, signed) to a generated record class."""
  for name, off, width, signed in bits: setattr(cls, name, BitField(name, off, width, signed))
  cls._bitfields_ = tuple(b[0] for b in bits)


def _detail(e: Exception) -> str:
  """What an OS-call error adds to 'CALL on TARGET failed: [Errno N] text' (its detail), else its whole message."""
  msg = str(e)
  if isinstance(e, OSCallError):
    import os
    head = f"{e.call} on {e.target} failed" + (f": [Errno {e.errno}] {os.strerror(e.errno)}" if e.errno is not None else "")
    if msg == head: return ""
    if msg.startswith(head + " (") and msg.endswith(")"): return msg[len(head) + 2:-1]
  if isinstance(e, OSError) and e.errno is not None and len(e.args) == 2: return ""   # just errno + strerror
  return msg


class Ioctl:
  """An ioctl request: `.nr .type .dir .struct .request`. Calling it as IOCTL(file, **fields) builds the struct,
  issues the ioctl through file.ioctl(request, struct) (or fcntl for an int fd) and returns the filled struct;
  an ioctl without argument (_IO) is called as IOCTL(file, arg=0) and returns the ioctl's result."""

  def __init__(self, name: str, dir: int, type: int, nr: int, struct=None):
    self.name, self.dir, self.type, self.nr, self.struct = name, dir, type, nr, struct
    self.size = ctypes.sizeof(struct) if struct is not None else 0
    self.request = IOC(dir, type, nr, self.size)

  def __repr__(self):
    st = self.struct.__name__ if self.struct is not None else None
    return f"Ioctl({self.name}, request={self.request:#x}, dir={self.dir}, type={self.type:#x}, nr={self.nr:#x}, struct={st})"

  def __call__(self, target, arg=None, **fields):
    if self.struct is None:
      if fields: raise TypeError(f"ioctl {self.name} takes no struct, got fields {sorted(fields)}")
      return self._issue(target, 0 if arg is None else arg)
    if arg is not None and fields: raise TypeError(f"ioctl {self.name}: pass a struct or fields, not both")
    record = issubclass(self.struct, (ctypes.Structure, ctypes.Union))
    if arg is None: buf = init(self.struct, **fields) if record else self.struct(*fields.values())
    elif isinstance(arg, int) and not record: buf = self.struct(arg)   # a scalar argument (e.g. unsigned int)
    else: buf = arg
    if not isinstance(buf, self.struct): raise TypeError(f"ioctl {self.name} takes {self.struct.__name__}, got {type(buf).__name__}")
    self._issue(target, buf)
    return buf

  def _issue(self, target, arg):
    if hasattr(target, "ioctl"):
      try: return target.ioctl(self.request, arg)
      except IoctlError: raise
      except (OSError, OSCallError) as e:   # keep what the file said (the mock explains its refusals)
        raise IoctlError(self.name, self.request, e.errno, str(getattr(target, "path", "") or target), _detail(e)) from e
    if isinstance(target, int):
      from . import fdioctl
      try: return fdioctl.ioctl(target, self.request, arg)
      except OSError as e: raise IoctlError(self.name, self.request, e.errno, f"fd {target}") from None
    raise TypeError(f"ioctl {self.name}: {target!r} is neither an open file with .ioctl() nor an int fd")


# ---------------------------------------------------------------- registers
class Field:
  __slots__ = ("name", "shift", "mask")

  def __init__(self, name: str, shift: int, mask: int):
    self.name, self.shift, self.mask = name, shift, mask   # mask: in place (as the header's X__F_MASK)

  def __repr__(self): return f"Field({self.name}, shift={self.shift}, mask={self.mask:#x})"

  def encode(self, value: int) -> int:
    v = (value << self.shift) & self.mask
    if v >> self.shift != value: raise ValueError(f"field {self.name}: {value:#x} does not fit in mask {self.mask:#x}")
    return v

  def decode(self, reg_value: int) -> int: return (reg_value & self.mask) >> self.shift


class Reg:
  """A register: offset (dwords, within the IP's base segment base_idx) and its fields."""
  __slots__ = ("name", "offset", "base_idx", "fields")

  def __init__(self, name: str, offset: int, base_idx: int, fields: dict[str, Field]):
    self.name, self.offset, self.base_idx, self.fields = name, offset, base_idx, fields

  def __repr__(self): return f"Reg({self.name}, offset={self.offset:#x}, base_idx={self.base_idx}, fields={list(self.fields)})"

  def addr(self, bases) -> int:
    """Absolute dword address: bases[base_idx] + offset (bases = the IP instance's segment bases)."""
    return bases[self.base_idx] + self.offset

  def encode(self, **values) -> int:
    out = 0
    for k, v in values.items():
      f = self.fields.get(k.upper()) or self.fields.get(k)
      if f is None: raise KeyError(f"register {self.name} has no field {k}")
      out |= f.encode(v)
    return out

  def decode(self, value: int) -> dict[str, int]:
    return {n: f.decode(value) for n, f in self.fields.items()}


class Registers(dict):
  """name -> Reg, also reachable as attributes (regs.COMPUTE_PGM_RSRC2)."""

  def __getattr__(self, name):
    try: return self[name]
    except KeyError: raise AttributeError(name) from None


def build_registers(ns: dict) -> Registers:
  """Reg objects from a register module's constants: regX, regX_BASE_IDX, X__F__SHIFT, X__F_MASK."""
  regs = Registers()
  for k, v in ns.items():
    if k.startswith("reg") and not k.endswith("_BASE_IDX") and isinstance(v, int):
      name = k[3:]
      regs[name] = Reg(name, v, ns.get(k + "_BASE_IDX", 0), {})
  for k, v in ns.items():
    if k.endswith("__SHIFT") and isinstance(v, int):
      reg, _, field = k[:-len("__SHIFT")].partition("__")
      mask = ns.get(f"{reg}__{field}_MASK")
      if reg in regs and mask is not None: regs[reg].fields[field] = Field(field, v, mask)
  return regs


def macro_field(fn, shift: int, mask: int):
  """Tag a translated function-like macro `((x) & mask) << shift` with its shift and (unshifted) mask."""
  fn.shift, fn.mask = shift, mask
  return fn


def define_constants(ns: dict, text: str):
  """Set the constants of a data block ("NAME VALUE [C type]" lines) in a generated module's namespace."""
  for line in text.splitlines():
    if line:
      parts = line.split()
      ns[parts[0]] = int(parts[1], 0)


def field_macro(name: str, shift: int, mask: int):
  """The function of a C macro `#define NAME(x) (((x) & mask) << shift)`, tagged with its shift and mask."""
  def fn(x): return (x & mask) << shift
  fn.__name__ = fn.__qualname__ = name
  return macro_field(fn, shift, mask)


def define_field_macros(ns: dict, text: str):
  """Set the field macros of a data block ("NAME SHIFT MASK" lines) in a generated module's namespace."""
  for line in text.splitlines():
    if line:
      name, shift, mask = line.split()
      fn = ns[name] = field_macro(name, int(shift), int(mask, 0))
      fn.__module__ = ns.get("__name__", fn.__module__)
