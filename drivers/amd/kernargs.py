"""The AMD implementation of the runtime's argument layout (hcq.drivers.hcq.args.ArgLayout): explicit arguments
checked and packed by the kernel's signature, hidden arguments of AMDGPU code object v5 filled in per launch shape.

The argument records are those of the code object's metadata (AMDGPU code object v5, LLVM AMDGPUUsage
"Code Object V5 Metadata": .offset, .size, .value_kind, .type_name, .address_space, .name)."""
from __future__ import annotations

import dataclasses
import struct

from ...errors import DeviceError
from ..hcq.args import is_integer


@dataclasses.dataclass(frozen=True)
class Arg:
  """One kernel argument's place in the kernarg segment."""
  offset: int
  size: int
  kind: str              # value_kind: global_buffer, by_value, hidden_*
  type_name: str = ""
  name: str = ""
  address_space: str = ""
  align: int = 0         # .pointee_align of a dynamic_shared_pointer (the alignment of its LDS block)

  @property
  def hidden(self) -> bool: return self.kind.startswith("hidden_")

  @property
  def is_pointer(self) -> bool: return self.kind == "global_buffer"

  def describe(self) -> str:
    what = f"({self.type_name or self.kind}, {self.size} bytes)"
    return f"{self.name} {what}" if self.name else what


# by_value scalar codes by (base type name, size): struct format char and whether it is a float
_SCALARS = {
  ("char", 1): "b", ("uchar", 1): "B", ("bool", 1): "?", ("short", 2): "h", ("ushort", 2): "H",
  ("int", 4): "i", ("uint", 4): "I", ("long", 8): "q", ("ulong", 8): "Q", ("size_t", 8): "Q",
  ("float", 4): "f", ("double", 8): "d", ("half", 2): "e",
  ("int8_t", 1): "b", ("uint8_t", 1): "B", ("int16_t", 2): "h", ("uint16_t", 2): "H", ("int32_t", 4): "i",
  ("uint32_t", 4): "I", ("int64_t", 8): "q", ("uint64_t", 8): "Q", ("unsigned int", 4): "I",
  ("unsigned long", 8): "Q", ("unsigned char", 1): "B", ("unsigned short", 2): "H",
}
_INT_RANGES = {"b": (-2**7, 2**7), "B": (0, 2**8), "h": (-2**15, 2**15), "H": (0, 2**16), "i": (-2**31, 2**31),
               "I": (0, 2**32), "q": (-2**63, 2**63), "Q": (0, 2**64)}


def scalar_code(arg: Arg) -> str | None:
  """The struct code of a by_value scalar; "int" for an untyped one of 1, 2, 4 or 8 bytes (any integer that fits,
  signed or not); None for aggregates (vectors, structs), passed as raw bytes of the argument's size."""
  code = _SCALARS.get((arg.type_name.strip(), arg.size))
  if code is None and not arg.type_name.strip() and arg.size in (1, 2, 4, 8): return "int"
  return code


# the size of each hidden argument hcq fills in (LLVM AMDGPUUsage, "Code Object V5 Metadata"): a record of another
# size is a corrupt code object, refused when the kernel is loaded rather than overflowing at its first launch
HIDDEN_SIZES = {
  **{f"hidden_block_count_{d}": 4 for d in "xyz"}, **{f"hidden_group_size_{d}": 2 for d in "xyz"},
  **{f"hidden_remainder_{d}": 2 for d in "xyz"}, **{f"hidden_global_offset_{d}": 8 for d in "xyz"},
  "hidden_grid_dims": 2, "hidden_queue_ptr": 8, "hidden_dynamic_lds_size": 4,
}
# the largest kernarg segment accepted, far more than any kernel's arguments need: the segment is built per launch
# shape and copied at every launch, so a corrupt size must be refused before
MAX_KERNARG_SEGMENT = 64 << 10


class KernargLayout:
  """The kernarg segment of one kernel: packs explicit arguments (Buffers as addresses, scalars by type) and the
  hidden arguments that depend on the launch shape."""

  def __init__(self, kernel: str, args: list[Arg], segment_size: int, segment_align: int = 8, static_lds: int = 0):
    """static_lds: the kernel's fixed LDS (group segment) bytes; LDS blocks of __local pointer arguments follow it."""
    self.kernel, self.segment_size, self.segment_align = kernel, segment_size, max(segment_align, 8)
    self.static_lds = static_lds
    self.explicit = [a for a in args if not a.hidden]
    self.hidden = [a for a in args if a.hidden]
    if segment_size > MAX_KERNARG_SEGMENT:
      raise DeviceError(f"kernel {kernel}: kernarg segment of {segment_size} bytes is larger than the "
                        f"{MAX_KERNARG_SEGMENT} bytes hcq takes")
    for a in self.hidden:
      want = HIDDEN_SIZES.get(a.kind)
      if want is not None and a.size != want:
        raise DeviceError(f"kernel {kernel}: hidden argument {a.kind} at offset {a.offset} is {a.size} bytes, "
                          f"not {want}")
    for a in args:
      if a.offset + a.size > segment_size:
        raise DeviceError(f"kernel {kernel}: argument {a.describe()} at offset {a.offset} exceeds the kernarg segment "
                          f"of {segment_size} bytes")
    fmt, pos = "<", 0
    self._codes: list[str] = []
    for a in self.explicit:
      if a.offset < pos: raise DeviceError(f"kernel {kernel}: overlapping arguments at offset {a.offset}")
      fmt += "x" * (a.offset - pos)
      if a.kind == "dynamic_shared_pointer":   # a __local pointer: the caller gives the bytes, the kernarg the LDS offset
        if a.size != 4: raise DeviceError(f"kernel {kernel}: __local pointer {a.describe()} is not 4 bytes")
        fmt += "I"
        self._codes.append("lds")
        pos = a.offset + a.size
        continue
      code = "Q" if a.is_pointer else scalar_code(a)
      if a.is_pointer and a.size != 8: raise DeviceError(f"kernel {kernel}: pointer {a.describe()} is not 8 bytes")
      fmt += code if code and code != "int" else f"{a.size}s"
      self._codes.append("ptr" if a.is_pointer else code or "raw")
      pos = a.offset + a.size
    self._explicit_struct = struct.Struct(fmt)
    self._explicit_end = pos
    self.dynamic_shared = "lds" in self._codes

  def shared_layout(self, args: tuple) -> tuple[list[int], int]:
    """The LDS offsets of the blocks of the __local pointer arguments (args gives their sizes in bytes, in argument
    order, each aligned to its .pointee_align after the kernel's static LDS) and the end of the last one: the LDS size
    the launch needs. Checks the sizes (count checked by check_and_pack)."""
    offsets, end = [], self.static_lds
    for i, (code, v) in enumerate(zip(self._codes, args)):
      if code != "lds": continue
      if isinstance(v, (bool, float)) or not (isinstance(v, int) or _is_np_integer(v)) or int(v) < 0:
        self._reject(i, f"is a __local pointer: pass its size in bytes (an integer >= 0), got {v!r}")
      align = max(self.explicit[i].align, 4)
      start = (end + align - 1) // align * align
      offsets.append(start)
      end = start + int(v)
    return offsets, end

  def check_and_pack(self, args: tuple, buffer_type: type, owner=None) -> bytes:
    """Validate args against the signature (count and type) and pack the explicit part. Raises DeviceError
    naming the kernel and the argument. With `owner` (the launching device), a Buffer must belong to it and not be
    freed. (Hot path of every launch: error messages are only built on failure.)"""
    if len(args) != len(self.explicit):
      sig = ", ".join(a.describe() for a in self.explicit)
      raise DeviceError(f"kernel {self.kernel} takes {len(self.explicit)} arguments ({sig}), got {len(args)}")
    if not args: return self._explicit_struct.pack()   # no arguments (the count matched): nothing to check
    values = []
    lds_offsets = iter(self.shared_layout(args)[0]) if self.dynamic_shared else None
    for i, (code, v) in enumerate(zip(self._codes, args)):
      if code == "lds":
        values.append(next(lds_offsets))
      elif code == "ptr":
        if not isinstance(v, buffer_type): self._reject(i, f"needs a Buffer, got {type(v).__name__}")
        if owner is not None and (v.device is not owner or v.freed):
          self._reject(i, f"{v} was freed" if v.freed else f"{v} belongs to another device ({v.device.name})")
        values.append(v.va)
      elif code == "int":
        if isinstance(v, (bool, float)) or not (isinstance(v, int) or _is_np_integer(v)):
          self._reject(i, f"needs an integer, got {type(v).__name__}")
        size = self.explicit[i].size
        v, bits = int(v), 8 * size
        if not -(1 << (bits - 1)) <= v < (1 << bits): self._reject(i, f"{v} does not fit {size} bytes", ":")
        values.append((v & ((1 << bits) - 1)).to_bytes(size, "little"))
      elif code == "raw":
        size = self.explicit[i].size
        if not isinstance(v, (bytes, bytearray, memoryview)) or len(v) != size:
          self._reject(i, f"is passed as {size} raw bytes, got {type(v).__name__}")
        values.append(bytes(v))
      elif code in "fde":
        if isinstance(v, bool) or not isinstance(v, (int, float)) and not _is_np_number(v):
          self._reject(i, f"needs a number, got {type(v).__name__}")
        values.append(float(v))
      else:
        if isinstance(v, (float, buffer_type)) or not (isinstance(v, int) or _is_np_integer(v)):
          self._reject(i, f"needs an integer, got {type(v).__name__}")
        v = int(v)
        lo, hi = _INT_RANGES.get(code, (0, 2))
        if not lo <= v < hi: self._reject(i, f"{v} is out of range [{lo}, {hi})", ":")
        values.append(v)
    return self._explicit_struct.pack(*values)

  def _reject(self, i: int, why: str, sep: str = "") -> None:
    a = self.explicit[i]
    raise DeviceError(f"kernel {self.kernel}: argument {i} {a.describe()}{sep} {why}")

  def hidden_values(self, grid: tuple[int, int, int], block: tuple[int, int, int], extra: dict[str, int]) -> bytes:
    """The bytes from the end of the explicit arguments to the end of the segment, hidden arguments filled in.
    grid counts work-groups, block threads per work-group. `extra` gives device-specific hidden values by
    value_kind (e.g. hidden_private_base); unknown hidden kinds stay zero (no feature of theirs is provided)."""
    out = bytearray(self.segment_size - self._explicit_end)
    base = self._explicit_end
    dims = 3 if grid[2] > 1 or block[2] > 1 else 2 if grid[1] > 1 or block[1] > 1 else 1
    # LLVM AMDGPUUsage, "Code Object V5 Metadata", hidden arguments
    values = {
      "hidden_block_count_x": grid[0], "hidden_block_count_y": grid[1], "hidden_block_count_z": grid[2],
      "hidden_group_size_x": block[0], "hidden_group_size_y": block[1], "hidden_group_size_z": block[2],
      # remainder: threads of the last, partial work-group; the grid here is always whole work-groups
      "hidden_remainder_x": 0, "hidden_remainder_y": 0, "hidden_remainder_z": 0,
      "hidden_global_offset_x": 0, "hidden_global_offset_y": 0, "hidden_global_offset_z": 0,
      "hidden_grid_dims": dims,
    }
    values.update(extra)
    for a in self.hidden:
      v = values.get(a.kind)
      if v is None: continue
      if a.offset < base: raise DeviceError(f"kernel {self.kernel}: hidden argument {a.kind} overlaps explicit ones")
      out[a.offset - base:a.offset - base + a.size] = int(v).to_bytes(a.size, "little")
    return bytes(out)


def _is_np_number(v) -> bool:
  try:
    import numpy as np
  except ImportError: return False
  return isinstance(v, (np.floating, np.integer))


def _is_np_integer(v) -> bool: return is_integer(v)
