"""NV code objects and programs: PTX and cubins, the CUDA parameter ABI, per-shape QMD templates.

Code objects:
  - a cubin (ELF, e_machine EM_CUDA 190): each kernel's .text.<name> is its SASS; .nv.info.<name> attributes give
    the parameter layout (EIATTR_KPARAM_INFO: ordinal, offset, size), where the parameters start in constant bank 0
    (EIATTR_PARAM_CBANK), the register count (EIATTR_REGCOUNT in .nv.info), the stack (EIATTR_MIN_STACK_SIZE);
    .nv.shared.<name> its static shared memory. Format: nvidia's cuobjdump/nvdisasm ELF notes (EIATTR_*);
    checked on ptxas 12.9 output (KPARAM_INFO: u32 index, u16 ordinal,
    u16 offset, u32 flags with the size in bits 31:18; PARAM_CBANK: u32 symbol, u16 offset, u16 size; REGCOUNT and
    MIN_STACK_SIZE in .nv.info: u32 symbol, u32 value). Not handled yet: relocations, constant banks other than 0
    (.nv.constant3 module constants), .nv.global variables: a cubin needing them is refused.
  - PTX: compiled to a cubin for sm_XY by nvJitLink (pip nvidia-nvjitlink-cu12) or ptxas (pip nvidia-cuda-nvcc-cu12)
    when one is found; the image keeps the PTX beside the SASS as a CUDA fatbin does (ptx_image: one PTX_ENTRY record
    per kernel, the SASS after it), and holds the PTX alone when no compiler is found or it refused the text (a GPU
    that runs SASS then stops at the launch, with the reason in the error).
The CUDA parameter ABI: parameters in declaration order, each at its natural (or .align) alignment, from the
parameter base of constant bank 0 (0x160 on sm_7x/8x, 0x210 on sm_90, 0x380 on sm_100+; a cubin says where)."""
from __future__ import annotations

import re
import struct
from typing import NamedTuple

from ...errors import DeviceError
from ..hcq import Buffer, Program
from ..hcq.args import is_integer

PTX_ENTRY_MAGIC = b"PTXENTRY"
PTX_ENTRY_HEADER = 24
PARAM_BASE = {7: 0x160, 8: 0x160, 9: 0x210, 10: 0x380, 12: 0x380}
PTX_TYPES = {"u8": 1, "s8": 1, "b8": 1, "u16": 2, "s16": 2, "b16": 2, "f16": 2, "bf16": 2, "u32": 4, "s32": 4,
             "b32": 4, "f32": 4, "u64": 8, "s64": 8, "b64": 8, "f64": 8}
EM_CUDA = 190


class Param:
  __slots__ = ("name", "ptype", "size", "align", "offset")

  def __init__(self, name, ptype, size, align, offset):
    self.name, self.ptype, self.size, self.align, self.offset = name, ptype, size, align, offset

  def __repr__(self): return f"Param({self.name}: .{self.ptype} x{self.size}B @{self.offset})"


class KernelInfo:
  """What a launch needs of one kernel: its parameters, where they start in constant bank 0, registers, shared and
  local memory, a required block size, and its code (PTX text or SASS bytes)."""

  def __init__(self, name: str, params: list[Param], param_base: int | None = None, registers: int = 32,
               shared: int = 0, local: int = 0, required_block=None, max_threads: int = 1024):
    self.name, self.params, self.param_base, self.registers = name, params, param_base, registers
    self.shared, self.local, self.required_block, self.max_threads = shared, local, required_block, max_threads
    self.param_bytes = max((p.offset + p.size for p in params), default=0)
    self.dynamic_shared = False      # the kernel uses dynamic shared memory: its launches give the size
    self.no_sass: str | None = None  # PTX loaded without SASS: why (no compiler, a refused text)


# ---- PTX
_ENTRY = re.compile(r"\.entry\s+([A-Za-z_$%][\w$%]*)\s*\(([^)]*)\)", re.S)
_PARAM = re.compile(r"\.param\s+(?:\.align\s+(\d+)\s+)?\.(\w+)\s+([A-Za-z_$%][\w$%]*)\s*(?:\[\s*(\d+)\s*\])?")
_SHARED = re.compile(r"(\.extern\s+)?\.shared\s+(?:\.align\s+(\d+)\s+)?\.(\w+)\s+([A-Za-z_$%][\w$%]*)\s*((?:\[\s*\d*\s*\])*)")
_LOCAL = re.compile(r"()\.local\s+(?:\.align\s+(\d+)\s+)?\.(\w+)\s+([A-Za-z_$%][\w$%]*)\s*((?:\[\s*\d*\s*\])*)")
_REQNTID = re.compile(r"\.reqntid\s+(\d+)(?:\s*,\s*(\d+))?(?:\s*,\s*(\d+))?")
_MAXNTID = re.compile(r"\.maxntid\s+(\d+)(?:\s*,\s*(\d+))?(?:\s*,\s*(\d+))?")


def is_ptx(image: bytes) -> bool:
  head = image[:4096].lstrip()
  return not image.startswith(b"\x7fELF") and (b".version" in head or b".target" in head or b".entry" in image)


def _body_end(text: str, start: int) -> int:
  """The position after the } that closes the body opened at or after start."""
  i = text.find("{", start)
  depth = 0
  while i != -1 and i < len(text):
    if text[i] == "{": depth += 1
    elif text[i] == "}":
      depth -= 1
      if depth == 0: return i + 1
    i += 1
  return len(text)


def _shared(decls) -> tuple[int, bool]:
  """(static .shared bytes laid out in order at their alignments, whether an extern/unsized one (dynamic) is there)."""
  off, dynamic = 0, False
  for m in decls:
    extern, align_s, ptype, _, dims = m.groups()
    counts = [int(x) for x in re.findall(r"\[\s*(\d*)\s*\]", dims) if x] if dims else []
    if extern or (dims and not counts) or ptype not in PTX_TYPES:
      dynamic = dynamic or bool(extern or dims)
      continue
    size = PTX_TYPES[ptype]
    for c in counts: size *= c
    align = int(align_s) if align_s else PTX_TYPES[ptype]
    off = (off + align - 1) // align * align + size
  return off, dynamic


def ptx_kernels(text: str, where: str) -> dict[str, KernelInfo]:
  """Kernels of a PTX module: parameters (the CUDA ABI layout) from the .entry signatures, static .shared bytes
  (module-level declarations before the entry, then the body's) and whether it uses dynamic shared memory (an
  .extern or unsized .shared array)."""
  text = re.sub(r"//[^\n]*", "", text)
  kernels, bodies = {}, []
  entries = list(_ENTRY.finditer(text))
  for m in entries: bodies.append((m.start(), _body_end(text, m.end())))
  for m, (start, end) in zip(entries, bodies):
    module_level = [d for d in _SHARED.finditer(text, 0, start) if not any(a <= d.start() < b for a, b in bodies)]
    shared, dynamic = _shared(module_level + list(_SHARED.finditer(text, m.end(), end)))
    name, params, offset = m.group(1), [], 0
    for p in m.group(2).split(","):
      if not p.strip(): continue
      pm = _PARAM.search(p)
      if pm is None: raise DeviceError(f"{where}: kernel {name}: cannot read parameter {p.strip()!r}")
      align_s, ptype, pname, count = pm.groups()
      if ptype not in PTX_TYPES: raise DeviceError(f"{where}: kernel {name}: parameter {pname} has type .{ptype}")
      size = PTX_TYPES[ptype] * int(count or 1)
      align = int(align_s) if align_s else PTX_TYPES[ptype]
      offset = (offset + align - 1) // align * align
      params.append(Param(pname, ptype if not count else f"{ptype}[{count}]", size, align, offset))
      offset += size
    tail = text[m.end():m.end() + 300].split("{", 1)[0]
    req = _REQNTID.search(tail)
    mx = _MAXNTID.search(tail)
    # .local arrays of the body: a thread's local memory (the stack window a launch must give it)
    local, _ = _shared(_LOCAL.finditer(text, m.end(), end))
    k = KernelInfo(name, params, shared=shared, local=local)
    k.dynamic_shared = dynamic
    if req: k.required_block = tuple(int(x or 1) for x in req.groups())
    if mx: k.max_threads = min(1024, int(mx.group(1)) * int(mx.group(2) or 1) * int(mx.group(3) or 1))
    kernels[name] = k
  return kernels


def ptx_image(text: bytes, names: list[str], base: int, sass: dict | None = None) -> tuple[bytes, dict[str, int]]:
  """A module's code image, as a CUDA fatbin carries a kernel's PTX beside its SASS: the PTX text, then per kernel
  a PTX_ENTRY record (magic, text address, text length, name length, name; 256-byte aligned) and, where `sass` has
  the kernel's code, that code 256-byte aligned after the record, its 16 bytes before it the magic and the record's
  address (data nothing executes). A GPU runs the program address: the SASS where there is some, else the record (a
  GPU that executes PTX finds the PTX either way). Returns (image, {kernel: offset of its program address})."""
  sass = sass or {}
  out = bytearray(text)
  offsets = {}
  for name in names:
    out += bytes(-len(out) % 256)
    record = len(out)
    raw = name.encode()
    out += PTX_ENTRY_MAGIC + struct.pack("<QII", base, len(text), len(raw)) + raw
    code = sass.get(name)
    if code is None:
      offsets[name] = record
      continue
    out += bytes(-(len(out) + 16) % 256)
    out += PTX_ENTRY_MAGIC + struct.pack("<Q", base + record)
    offsets[name] = len(out)
    out += code
  return bytes(out), offsets


def compile_ptx(text: bytes, arch: str, compiler) -> bytes:
  """A cubin for `arch` ("sm_90") from PTX by `compiler` (compiler/backend/cubin.PTXCompiler: nvJitLink or ptxas);
  DeviceError when neither is there or the compile fails."""
  from ...compiler.ir import CompileError
  try: return compiler.compile(text, arch)
  except CompileError as e: raise DeviceError(str(e)) from None


# ---- cubins
EIATTR_PARAM_CBANK, EIATTR_MIN_STACK_SIZE, EIATTR_KPARAM_INFO, EIATTR_CBANK_PARAM_SIZE = 0x0A, 0x12, 0x17, 0x19
EIATTR_MAX_THREADS, EIATTR_REQNTID, EIATTR_REGCOUNT = 0x05, 0x10, 0x2F
EIFMT_NVAL, EIFMT_BVAL, EIFMT_HVAL, EIFMT_SVAL = 1, 2, 3, 4


class Section(NamedTuple):
  type: int
  data: bytes        # empty for SHT_NOBITS (no bytes in the file: .nv.shared.*)
  info: int
  size: int          # sh_size: len(data), or a NOBITS section's size


SHT_NOBITS = 8
ELF64_SHDR = struct.Struct("<IIQQQQIIQQ")


def _elf_sections(image: bytes, where: str) -> dict[str, Section]:
  """{name: Section} of an ELF64 little-endian image."""
  if len(image) < 64 or image[:4] != b"\x7fELF" or image[4] != 2 or image[5] != 1:
    raise DeviceError(f"{where}: not a 64-bit little-endian ELF")
  shoff, = struct.unpack_from("<Q", image, 0x28)
  shentsize, shnum, shstrndx = struct.unpack_from("<HHH", image, 0x3A)
  if shentsize < ELF64_SHDR.size:
    raise DeviceError(f"{where}: ELF section header size {shentsize} is below Elf64_Shdr's {ELF64_SHDR.size} bytes")
  if shoff + shnum * shentsize > len(image) or shstrndx >= shnum:
    raise DeviceError(f"{where}: the ELF section table lies outside the image")
  hdrs = [ELF64_SHDR.unpack_from(image, shoff + i * shentsize) for i in range(shnum)]
  def section(h) -> Section:
    if h[1] == SHT_NOBITS: return Section(h[1], b"", h[7], h[5])      # size only: nothing to read or allocate
    if h[4] + h[5] > len(image): raise DeviceError(f"{where}: an ELF section lies outside the image")
    return Section(h[1], image[h[4]:h[4] + h[5]], h[7], h[5])
  names = section(hdrs[shstrndx]).data
  out = {}
  for h in hdrs:
    end = names.find(b"\0", h[0])
    out[names[h[0]:end].decode(errors="replace")] = section(h)
  return out


def _attributes(blob: bytes, where: str, section: str):
  """(attribute, value) of an .nv.info section: EIFMT_SVAL a u16 size and that many bytes, the others 2 bytes in a
  4-byte record; one that does not fit the section is an error naming it."""
  pos = 0
  while pos < len(blob):
    if pos + 4 > len(blob):
      raise DeviceError(f"{where}: section {section}: the attribute at byte {pos} is cut at the section's end "
                        f"({len(blob)} bytes)")
    fmt, attr = blob[pos], blob[pos + 1]
    if fmt == EIFMT_SVAL:
      size, = struct.unpack_from("<H", blob, pos + 2)
      if pos + 4 + size > len(blob):
        raise DeviceError(f"{where}: section {section}: attribute {attr:#x} at byte {pos} ({size} bytes) is cut at "
                          f"the section's end ({len(blob)} bytes)")
      yield attr, blob[pos + 4:pos + 4 + size]
      pos += 4 + size
    elif fmt == EIFMT_HVAL:
      yield attr, blob[pos + 2:pos + 4]
      pos += 4
    elif fmt == EIFMT_BVAL:
      yield attr, blob[pos + 2:pos + 3]
      pos += 4
    else:
      yield attr, b""
      pos += 4


def _symbols(secs) -> dict[str, int]:
  """{name: symbol index} from .symtab (Elf64_Sym: st_name u32, st_info u8, st_other u8, st_shndx u16, st_value,
  st_size) and .strtab."""
  if ".symtab" not in secs or ".strtab" not in secs: return {}
  tab, strtab = secs[".symtab"].data, secs[".strtab"].data
  out = {}
  for i in range(len(tab) // 24):
    (st_name,) = struct.unpack_from("<I", tab, 24 * i)
    end = strtab.find(b"\0", st_name)
    if st_name and end > st_name: out[strtab[st_name:end].decode(errors="replace")] = i
  return out


def cubin_kernels(image: bytes, where: str) -> dict[str, tuple[KernelInfo, bytes]]:
  """{name: (KernelInfo, SASS bytes)} from a cubin's sections and .nv.info attributes. A corrupt cubin is a
  DeviceError naming `where` (every read is bounds-checked; a struct read past a section's end is one too)."""
  try: return _cubin_kernels(image, where)
  except struct.error as e: raise DeviceError(f"{where}: the cubin is corrupt: {e}") from None


def _cubin_kernels(image: bytes, where: str) -> dict[str, tuple[KernelInfo, bytes]]:
  secs = _elf_sections(image, where)
  e_machine, = struct.unpack_from("<H", image, 0x12)
  if e_machine != EM_CUDA: raise DeviceError(f"{where}: ELF machine {e_machine} is not CUDA ({EM_CUDA})")
  # .nv.info holds per-function attributes keyed by the function's symbol index (.symtab)
  per_sym: dict[int, dict] = {}
  if ".nv.info" in secs:
    for attr, val in _attributes(secs[".nv.info"].data, where, ".nv.info"):
      if attr in (EIATTR_REGCOUNT, EIATTR_MIN_STACK_SIZE) and len(val) >= 8:
        sym, n = struct.unpack_from("<II", val)
        per_sym.setdefault(sym, {})[attr] = n
  symbols = _symbols(secs)
  unsupported = [n for n in secs if n.startswith((".rel.text.", ".rela.text.", ".nv.global")) or
                 (n.startswith(".nv.constant") and not n.startswith(".nv.constant0"))]
  if unsupported:
    raise DeviceError(f"{where}: the cubin needs {', '.join(sorted(unsupported))} (relocations, module constants or "
                      f"global variables), which hcq's loader does not handle yet")
  out = {}
  for sname, sec in secs.items():
    if not sname.startswith(".text."): continue
    code = sec.data
    name = sname[len(".text."):]
    attrs = per_sym.get(symbols.get(name, -1), {})
    params, base, stack, req = [], None, attrs.get(EIATTR_MIN_STACK_SIZE, 0), None
    info = secs.get(f".nv.info.{name}")
    for attr, val in _attributes(info.data if info else b"", where, f".nv.info.{name}"):
      if attr == EIATTR_KPARAM_INFO and len(val) >= 12:
        _, ordinal, offset, flags = struct.unpack_from("<IHHI", val)
        size = (flags >> 18) & 0x3FFF
        params.append((ordinal, offset, size))
      elif attr == EIATTR_PARAM_CBANK and len(val) >= 8:
        _, base_off, _size = struct.unpack_from("<IHH", val)
        base = base_off
      elif attr == EIATTR_MIN_STACK_SIZE and len(val) >= 8: stack = struct.unpack_from("<II", val)[1]
      elif attr == EIATTR_REQNTID and len(val) >= 12: req = struct.unpack_from("<III", val)
    plist = [Param(f"param{o}", {1: "b8", 2: "b16", 4: "b32", 8: "b64"}.get(s, f"b8[{s}]"), s, min(s, 8) or 1, off)
             for o, off, s in sorted(params)]
    shared_sec = secs.get(f".nv.shared.{name}")
    shared = shared_sec.size if shared_sec else 0
    k = KernelInfo(name, plist, base, attrs.get(EIATTR_REGCOUNT, 32), shared, stack, req)
    out[name] = (k, code)
  if not out: raise DeviceError(f"{where}: the cubin has no .text.<kernel> sections")
  return out


# ---- arguments
class CUDAParams:
  """The runtime's ArgLayout for the CUDA parameter bank: Buffers and integers for 8-byte parameters (addresses),
  integers or floats for the others, packed at the kernel's offsets. A kernel with dynamic shared memory (an
  extern .shared array: CUDA's third launch parameter) takes its size in bytes as one more, last, argument."""

  def __init__(self, kernel: KernelInfo):
    self.kernel = kernel
    self.dynamic_shared = kernel.dynamic_shared
    self.params = kernel.params
    self.segment_size = kernel.param_bytes
    self._fast = None
    if all(p.ptype in ("u64", "b64", "s64") for p in self.params) and \
       [p.offset for p in self.params] == [8 * i for i in range(len(self.params))]:
      self._fast = struct.Struct(f"<{len(self.params)}Q")

  def shared_layout(self, args):
    if not self.dynamic_shared: return [], 0
    return [], int(args[-1]) if args and is_integer(args[-1]) else 0

  def hidden_values(self, grid, block, extra): return b""

  def check_and_pack(self, args: tuple, buffer_type: type, device) -> bytes:
    k = self.kernel
    if self.dynamic_shared:
      if len(args) != len(self.params) + 1 or not is_integer(args[-1]) or int(args[-1]) < 0:
        raise DeviceError(f"kernel {k.name}: uses dynamic shared memory: give its size in bytes as a last argument "
                          f"after the {len(self.params)} parameters ({', '.join(p.name for p in self.params)})")
      args = args[:-1]
    if len(args) != len(self.params):
      raise DeviceError(f"kernel {k.name}: takes {len(self.params)} arguments "
                        f"({', '.join(p.name for p in self.params)}), got {len(args)}")
    if self._fast is not None:      # every argument a Buffer of this device (one pass; no generator per launch)
      vas = []
      for a in args:
        if type(a) is not buffer_type: break
        if a.freed or a.device is not device: self._bad(a, device)
        vas.append(a.va)
      else: return self._fast.pack(*vas)
    out = bytearray(self.segment_size)
    for p, a in zip(self.params, args): out[p.offset:p.offset + p.size] = self._pack(p, a, buffer_type, device)
    return bytes(out)

  def _bad(self, a, device):
    if a.freed: raise DeviceError(f"kernel {self.kernel.name}: {a} was freed")
    raise DeviceError(f"kernel {self.kernel.name}: {a} belongs to another device")

  def _pack(self, p: Param, a, buffer_type, device) -> bytes:
    where = f"kernel {self.kernel.name}: argument {p.name} (.{p.ptype})"
    base = p.ptype.split("[")[0]
    if isinstance(a, Buffer):
      if not isinstance(a, buffer_type) or a.device is not device or a.freed: self._bad(a, device)
      if p.size != 8: raise DeviceError(f"{where}: a buffer is passed as an 8-byte address; this parameter has {p.size} bytes")
      return struct.pack("<Q", a.va)
    if isinstance(a, (bytes, bytearray)) and len(a) == p.size: return bytes(a)
    if base.startswith("f") or base == "bf16":
      if isinstance(a, bool) or not isinstance(a, (int, float)) and not hasattr(a, "__float__"):
        raise DeviceError(f"{where}: needs a number, got {type(a).__name__}")
      fmt = {"f16": "<e", "f32": "<f", "f64": "<d"}.get(base)
      if fmt is None: raise DeviceError(f"{where}: .{base} arguments are passed as bytes")
      return struct.pack(fmt, float(a))
    if isinstance(a, float) and p.size in (4, 8): return struct.pack("<f" if p.size == 4 else "<d", a)
    if not is_integer(a): raise DeviceError(f"{where}: needs an integer, got {a!r} ({type(a).__name__})")
    v = int(a)
    bits = 8 * p.size
    if not -(1 << (bits - 1)) <= v < (1 << bits):
      raise DeviceError(f"{where}: {v} does not fit {p.size} bytes")
    return (v & ((1 << bits) - 1)).to_bytes(p.size, "little")


class NVProgram(Program):
  """A loaded kernel: its code address, CUDA parameter layout, and per-shape QMD templates (device.qmd_template)."""

  def __init__(self, device, kernel: KernelInfo, code_va: int, code_size: int = 0):
    super().__init__(device, kernel.name, CUDAParams(kernel), kernel.max_threads)
    self.kernel, self.code_va, self.code_size = kernel, code_va, code_size
    self.required_block = kernel.required_block
    self.param_base = kernel.param_base if kernel.param_base is not None else device.param_base

  def shape_data(self, s) -> None:
    """The shape's QMD template (qmd) and constant buffer size; constant bank 0's c[0][0x0..0x18]: blockDim and
    gridDim, which SASS reads for %ntid and %nctaid (dims)."""
    s.qmd, s.cb_size = self.device.qmd_template(self, s.grid, s.block, s.shared or 0)
    s.dims = struct.pack("<6I", *s.block, *s.grid)
    s.launch_image = None     # made from qmd and dims at the first launch (NVDevice._launch_image)
    s.kept_launch = None      # [image, parameters, address, last timeline value] of launch data the shape keeps
