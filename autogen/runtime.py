"""What generated modules need at run time: struct helpers, the Ioctl object, register descriptions.

Importable without libclang (generated modules import only this and ctypes). It reaches the OS only through the
object it is handed: `IOCTL(file, ...)` calls `file.ioctl(request, struct)` (the OS interface's open files and the
mock's). A plain int fd is accepted for scripts and goes through fcntl in autogen/fdioctl.py.
"""
from __future__ import annotations

import ctypes
from typing import Any

from ioctl_opt import IOC, IOC_NONE, IOC_READ, IOC_WRITE  # noqa: F401  (re-exported for generated modules)


class IoctlError(OSError):
  """An ioctl failed: names the ioctl and the errno."""

  def __init__(self, name: str, request: int, errno: int | None, detail: str = ""):
    import os
    self.name, self.request = name, request
    msg = f"ioctl {name} (request {request:#x}) failed"
    if errno is not None: msg += f": [Errno {errno}] {os.strerror(errno)}"
    if detail: msg += f" ({detail})"
    super().__init__(errno, msg)

  def __str__(self): return self.args[1]


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
    v = getattr(obj, f[0])
    if isinstance(v, (ctypes.Structure, ctypes.Union)): v = as_dict(v)
    elif isinstance(v, ctypes.Array): v = [as_dict(x) if isinstance(x, (ctypes.Structure, ctypes.Union)) else x for x in v]
    out[f[0]] = v
  return out


def struct_repr(self) -> str:
  return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in as_dict(self).items())})"


class Struct(ctypes.Structure):
  __repr__ = struct_repr


class Union(ctypes.Union):
  __repr__ = struct_repr


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
      except OSError as e:
        if isinstance(e, IoctlError): raise
        raise IoctlError(self.name, self.request, e.errno, str(e)) from None
    if isinstance(target, int):
      from . import fdioctl
      try: return fdioctl.ioctl(target, self.request, arg)
      except OSError as e: raise IoctlError(self.name, self.request, e.errno) from None
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
