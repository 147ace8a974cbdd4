"""Programs the ir3 backend compiled (hcq.compiler.backend.ir3.IR3Program) on a QCOM device: dev.compile(sink).

The dispatch state comes from the program's metadata, as a computerator program's headers give it (program.py):
its work-group size (@localsize), the local id in r0.x and the work-group id in r48.x (@invocationid, @wgid), its
shared memory (@localmem), its branch nesting (@branchstack); the register footprint and the constants it reads are
counted off its words (program.footprint). Arguments are taken in slot order: a Buffer becomes an IBO (its slot:
the buffer's rank among the buffer arguments; the descriptor's element count is the Buffer's size in dwords, so the
IBO unit's bounds check stops an access past it), an integer a 32-bit constant (c0.x, c0.y, ... by rank among the
integer arguments)."""
from __future__ import annotations

import struct

from ...errors import DeviceError
from .program import IBO_DWORDS, Kernel, QCOMProgram, ibo_descriptor


# the IBO format of a buffer by the size of its elements: the access size the program's ldib/stib use (8-, 16- and
# 32-bit untyped accesses; 8-byte elements are accessed as two 32-bit ones), as turnip describes a storage buffer
# once per access size (Mesa 25 src/freedreno/vulkan/tu_descriptor_set.cc: the 16- and 32-bit IBO descriptors)
_FORMAT = {1: "FMT6_8_UINT", 2: "FMT6_16_UINT", 4: "FMT6_32_UINT", 8: "FMT6_32_UINT"}


def buffer_ibo(va: int, nbytes: int, itemsize: int) -> list[int]:
  """The IBO descriptor of a buffer of nbytes accessed in itemsize elements: its element count (so the IBO unit's
  bounds check ends at the buffer's end) and format."""
  from .program import _a6xx
  a = _a6xx()
  size = min(itemsize, 4)
  d = ibo_descriptor(va, nbytes // size)
  d[0] = a.A6XX_TEX_CONST_0_FMT(a.ENUMS["a6xx_format"][_FORMAT[itemsize]])
  return d


class CompiledLayout:
  """The ArgLayout of a compiled kernel: Buffers and integers in slot order (a slot below the last one that the kernel
  does not read takes any argument, as the DSL numbers them)."""
  dynamic_shared = False

  def __init__(self, args, name: str):
    self.args, self.name = args, name
    self.segment_size = 16 * len(args)

  def shared_layout(self, args): return [], 0
  def hidden_values(self, grid, block, extra): return b""

  def check_and_pack(self, args, buffer_type, device) -> bytes:
    """Per argument two 64-bit words: (address, bytes) of a Buffer, (value, 0) of an integer."""
    from ..hcq.args import is_integer
    if len(args) != len(self.args):
      raise DeviceError(f"kernel {self.name}: takes {len(self.args)} argument(s), got {len(args)}")
    out = []
    for i, (a, (kind, slot, _, dtype)) in enumerate(zip(args, self.args)):
      if kind == "unused":              # a slot the kernel never reads: any Buffer or integer
        out += [0, 0]
      elif kind == "buffer":
        if not isinstance(a, buffer_type):
          raise DeviceError(f"kernel {self.name}: argument {i} must be a Buffer of {dtype}, got {type(a).__name__}")
        if a.device is not device:
          raise DeviceError(f"kernel {self.name}: argument {i}, {a}, belongs to another device")
        if a.freed: raise DeviceError(f"kernel {self.name}: argument {i}, {a}, was freed")
        out += [a.va, a.size]
      else:
        if not is_integer(a) or isinstance(a, bool):
          raise DeviceError(f"kernel {self.name}: argument {i} must be an integer ({dtype}), got {a!r}")
        v = int(a)
        if not -(1 << 31) <= v < (1 << 32):
          raise DeviceError(f"kernel {self.name}: argument {i} = {v} does not fit a 32-bit constant ({dtype})")
        out += [v & 0xFFFFFFFF, 0]
    return struct.pack(f"<{len(out)}Q", *out)


class CompiledProgram(QCOMProgram):
  def __init__(self, device, compiled, code_va: int, code_size: int, words: list[int]):
    nbuf = sum(1 for a in compiled.args if a[0] == "buffer")
    nint = sum(1 for a in compiled.args if a[0] == "int")
    kernel = Kernel(local_size=tuple(compiled.local_size), bufs=[(1, None)] * nbuf,
                    consts={k: 0 for k in range(nint)}, invocation_id=compiled.invocation_id, wgid=compiled.wgid,
                    branchstack=compiled.branchstack, localmem=compiled.localmem, pvtmem=compiled.pvtmem)
    pvt = device._pvt_memory(compiled.pvtmem) if compiled.pvtmem else None
    super().__init__(device, compiled.name, kernel, code_va, code_size, words, pvt)
    self.compiled = compiled
    self.layout = CompiledLayout(compiled.args, compiled.name)

  # the launch contract where a shape keeps a template of the launch data and a launch patches buffer addresses in
  # (QCOMProgram.shape_data / patch_addresses): a compiled kernel's data depend on all of its arguments (integer
  # constants, each IBO's element count from its Buffer's size), so the template is zeros and a launch writes it all
  def shape_data(self, s) -> None:
    s.data_size = self.constlen * 16 + 4 * IBO_DWORDS * sum(1 for a in self.compiled.args if a[0] == "buffer")
    s.data = bytes(s.data_size)

  def patch_addresses(self, view: memoryview, explicit: bytes) -> None:
    data = self.launch_data(explicit, None)
    view[:len(data)] = data

  def launch_data(self, explicit: bytes, grid) -> bytes:
    """Constants (constlen vec4s: the integer arguments from c0.x) then one IBO descriptor per buffer argument."""
    vals = struct.unpack(f"<{len(explicit) // 8}Q", explicit)
    consts = [0] * (self.constlen * 4)
    ibos = []
    for (kind, _, index, dtype), (a, b) in zip(self.compiled.args, zip(vals[0::2], vals[1::2])):
      if kind == "int": consts[index] = a
      elif kind == "buffer": ibos.append((index, buffer_ibo(a, b, dtype.itemsize)))
    words = [w for _, d in sorted(ibos) for w in d]
    return struct.pack(f"<{len(consts) + len(words)}I", *consts, *words)


__all__ = ["CompiledLayout", "CompiledProgram"]
