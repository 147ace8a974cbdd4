"""AMDGPU code objects (HSA ELF, code object v4/v5): reader.

    co = CodeObject.parse(open("k.hsaco", "rb").read())
    co.target                      # "amdgcn-amd-amdhsa--gfx1100"
    co.image                       # bytes: all SHF_ALLOC sections laid out at their addresses, relocations applied;
                                   # load it anywhere (R_AMDGPU_REL64 is position independent) and add co.abs_relocs
    k = co.kernels["vadd"]
    k.descriptor                   # KernelDescriptor (rsrc1/2/3, kernel_code_properties, segment sizes, entry offset)
    k.descriptor_address           # offset of the 64-byte descriptor in co.image (AQL kernel_object = base + this)
    k.entry_address                # offset of the first instruction in co.image (COMPUTE_PGM_LO/HI = (base + this) >> 8)
    k.code                         # the kernel's machine code bytes
    k.args                         # [KernelArg(name, offset, size, value_kind, ...)] incl. hidden_* (COV5)
    k.kernarg_segment_size, k.kernarg_segment_align, k.group_segment_fixed_size, k.private_segment_fixed_size,
    k.sgpr_count, k.vgpr_count, k.wavefront_size, k.reqd_workgroup_size, k.max_flat_workgroup_size, k.metadata

Formats: LLVM AMDGPUUsage "ELF Code Object" (EI_OSABI 64 = ELFOSABI_AMDGPU_HSA, EI_ABIVERSION 2 = code object v4,
3 = v5, EM_AMDGPU = 224, e_flags EF_AMDGPU_MACH in bits 7:0, e.g. 0x41 gfx1100), "Code Object V3+ Metadata"
(NT_AMDGPU_METADATA = 32 in an "AMDGPU" note, a msgpack map), "Relocation Records" (R_AMDGPU_REL64 = 5: S + A - P).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .descriptor import KD_SIZE, KernelDescriptor
from .elf import (ET_REL, EM_AMDGPU, SHF_ALLOC, SHT_DYNSYM, SHT_NOBITS, SHT_NOTE, SHT_RELA, SHT_SYMTAB, ElfFile,
                  notes, parse_elf, relocations, symbols)
from .errors import CodeObjectError

NT_AMDGPU_METADATA = 32
ELFOSABI_AMDGPU_HSA = 64
R_AMDGPU_NONE, R_AMDGPU_ABS32_LO, R_AMDGPU_ABS32_HI, R_AMDGPU_ABS64 = 0, 1, 2, 3
R_AMDGPU_REL32, R_AMDGPU_REL64, R_AMDGPU_ABS32, R_AMDGPU_REL32_LO, R_AMDGPU_REL32_HI = 4, 5, 6, 10, 11
CODE_OBJECT_VERSION = {1: 3, 2: 4, 3: 5, 4: 6}   # EI_ABIVERSION -> code object version (HSA OS ABI)
# EF_AMDGPU_MACH values (AMDGPUUsage "AMDGPU ELF Header" table; llvm/BinaryFormat/ELF.h EF_AMDGPU_MACH_AMDGCN_*: gfx1101
# is 0x46 and gfx1102 0x47, 0x42/0x43 are gfx1013/gfx1150)
MACH_NAMES = {0x41: "gfx1100", 0x46: "gfx1101", 0x47: "gfx1102", 0x44: "gfx1103", 0x48: "gfx1200", 0x4e: "gfx1201",
              0x4c: "gfx942", 0x3f: "gfx90a", 0x36: "gfx1030"}
MACH_BY_NAME = {v: k for k, v in MACH_NAMES.items()}


@dataclass
class KernelArg:
  """One kernel argument as the code object's metadata describes it (.args)."""
  offset: int
  size: int
  value_kind: str
  name: str | None = None
  type_name: str | None = None
  address_space: str | None = None
  access: str | None = None
  raw: dict = field(default_factory=dict)

  @property
  def hidden(self) -> bool: return self.value_kind.startswith("hidden_")


@dataclass
class Kernel:
  """One kernel of a code object: its descriptor, entry point and metadata."""
  name: str
  descriptor: KernelDescriptor
  descriptor_address: int
  entry_address: int
  code: bytes
  args: list[KernelArg]
  metadata: dict

  def _md(self, key, default=None):
    return self.metadata.get(key, default)

  @property
  def kernarg_segment_size(self) -> int: return self._md(".kernarg_segment_size", self.descriptor.kernarg_size)
  @property
  def kernarg_segment_align(self) -> int: return self._md(".kernarg_segment_align", 8)
  @property
  def group_segment_fixed_size(self) -> int:
    return self._md(".group_segment_fixed_size", self.descriptor.group_segment_fixed_size)
  @property
  def private_segment_fixed_size(self) -> int:
    return self._md(".private_segment_fixed_size", self.descriptor.private_segment_fixed_size)
  @property
  def sgpr_count(self) -> int | None: return self._md(".sgpr_count")
  @property
  def vgpr_count(self) -> int: return self._md(".vgpr_count", self.descriptor.vgpr_count())
  @property
  def wavefront_size(self) -> int: return self._md(".wavefront_size", 32 if self.descriptor.wavefront_size32 else 64)
  @property
  def reqd_workgroup_size(self) -> tuple[int, int, int] | None:
    v = self._md(".reqd_workgroup_size")
    return tuple(v) if v else None
  @property
  def max_flat_workgroup_size(self) -> int | None: return self._md(".max_flat_workgroup_size")
  @property
  def explicit_args(self) -> list[KernelArg]: return [a for a in self.args if not a.hidden]
  @property
  def hidden_args(self) -> list[KernelArg]: return [a for a in self.args if a.hidden]


@dataclass
class CodeObject:
  """An AMDGPU code object: its ELF, its loadable image and its kernels."""
  elf: ElfFile
  image: bytes
  section_addresses: dict[str, int]
  symbols: dict[str, int]
  kernels: dict[str, Kernel]
  metadata: dict
  abs_relocs: list[tuple[int, int, int]]   # (image offset, size, value to which the load base is added)
  # non-weak symbols that relocations need and no section defines (SHN_UNDEF): they resolved to 0 in `image`, so a
  # loader with nothing to link them against must refuse the object (clang -nogpulib printf needs __printf_alloc)
  undefined_symbols: list[str] = field(default_factory=list)

  @property
  def code_object_version(self) -> int | None:
    if self.elf.osabi != ELFOSABI_AMDGPU_HSA: return None
    return CODE_OBJECT_VERSION.get(self.elf.abiversion)

  @property
  def mach(self) -> str:
    m = self.elf.flags & 0xff
    return MACH_NAMES.get(m, f"mach{m:#x}")

  @property
  def target(self) -> str:
    return self.metadata.get("amdhsa.target") or f"amdgcn-amd-amdhsa--{self.mach}"

  @property
  def text(self) -> bytes:
    sec = self.elf.section(".text")
    return self.elf.section_bytes(sec) if sec else b""

  @classmethod
  def parse(cls, data: bytes) -> "CodeObject":
    elf = parse_elf(data)
    if elf.machine != EM_AMDGPU:
      raise CodeObjectError(f"e_machine {elf.machine} is not EM_AMDGPU ({EM_AMDGPU})", 0x12)
    image, addrs = _layout(elf)
    syms = _symbols(elf, addrs)
    undefined: list[str] = []
    abs_relocs = _apply_relocations(elf, image, addrs, syms, undefined)
    md = _metadata(elf)
    kernels = _kernels(elf, bytes(image), syms, md, addrs)
    return cls(elf, bytes(image), {elf.sections[i].name: a for i, a in addrs.items()},
               {s.name: a for s, a in syms}, kernels, md, abs_relocs, undefined)


# the largest load image accepted: kernels' code and data are kilobytes to a few megabytes; a corrupt sh_addr or
# NOBITS sh_size must not make the reader allocate gigabytes
MAX_IMAGE_SIZE = 256 << 20


def _layout(elf: ElfFile) -> tuple[bytearray, dict[int, int]]:
  """Address of each SHF_ALLOC section in the load image: sh_addr for linked files, packed by alignment for ET_REL."""
  addrs: dict[int, int] = {}
  cursor = 0
  for sec in elf.sections:
    if not sec.flags & SHF_ALLOC: continue
    if elf.type == ET_REL:
      align = max(sec.addralign, 1)
      cursor = (cursor + align - 1) // align * align
      addrs[sec.index] = cursor
      cursor += sec.size
    else:
      addrs[sec.index] = sec.addr
  end = max((addrs[s.index] + s.size for s in elf.sections if s.index in addrs), default=0)
  if end > MAX_IMAGE_SIZE:
    raise CodeObjectError(f"load image of {end:#x} bytes (section addresses and sizes) is larger than the "
                          f"{MAX_IMAGE_SIZE >> 20} MiB a code object may take", None)
  image = bytearray(end)
  for sec in elf.sections:
    if sec.index in addrs and sec.type != SHT_NOBITS and sec.size:
      image[addrs[sec.index]:addrs[sec.index] + sec.size] = elf.section_bytes(sec)
  return image, addrs


def _symbols(elf: ElfFile, addrs: dict[int, int]):
  tabs = [s for s in elf.sections if s.type == SHT_SYMTAB] or [s for s in elf.sections if s.type == SHT_DYNSYM]
  out = []
  for tab in tabs:
    for sym in symbols(elf, tab):
      if elf.type == ET_REL and 0 < sym.shndx < 0xff00:
        out.append((sym, addrs.get(sym.shndx, 0) + sym.value))
      else:
        out.append((sym, sym.value))
  return out


STB_WEAK, SHN_UNDEF = 2, 0   # ELF symbol binding and section index (System V gABI, elf.h)


def _apply_relocations(elf, image: bytearray, addrs, syms, undefined: list[str]) -> list[tuple[int, int, int]]:
  """Apply the relocations to image; return the absolute ones; append undefined non-weak symbol names to undefined."""
  abs_relocs = []
  symtab_cache: dict[int, list] = {}
  for sec in elf.sections:
    if sec.type != SHT_RELA: continue
    if sec.link >= len(elf.sections): raise CodeObjectError(f"{sec.name}: sh_link {sec.link} is no section", sec.header_offset)
    if sec.link not in symtab_cache:
      tab = elf.sections[sec.link]
      symtab_cache[sec.link] = symbols(elf, tab) if tab.type in (SHT_SYMTAB, SHT_DYNSYM) else []
    tsyms = symtab_cache[sec.link]
    target = elf.sections[sec.info] if elf.type == ET_REL and sec.info < len(elf.sections) else None
    if elf.type == ET_REL and (target is None or target.index not in addrs): continue  # relocations of non-loaded data
    for entry_off, r_offset, symidx, rtype, addend in relocations(elf, sec):
      where = addrs[target.index] + r_offset if target is not None else r_offset
      if symidx >= len(tsyms) and symidx: raise CodeObjectError(f"{sec.name}: symbol index {symidx} out of range", entry_off)
      s_value = 0
      if symidx:
        sym = tsyms[symidx]
        if sym.shndx == SHN_UNDEF and sym.bind != STB_WEAK and sym.name not in undefined: undefined.append(sym.name)
        s_value = addrs.get(sym.shndx, 0) + sym.value if elf.type == ET_REL and 0 < sym.shndx < 0xff00 else sym.value
      size = {R_AMDGPU_REL64: 8, R_AMDGPU_ABS64: 8}.get(rtype, 4)
      if rtype == R_AMDGPU_NONE: continue
      if where < 0 or where + size > len(image):
        raise CodeObjectError(f"{sec.name}: relocation target {where:#x} outside the load image", entry_off)
      if rtype == R_AMDGPU_REL64: val = (s_value + addend - where) & (1 << 64) - 1
      elif rtype in (R_AMDGPU_REL32, R_AMDGPU_REL32_LO): val = (s_value + addend - where) & 0xffffffff
      elif rtype == R_AMDGPU_REL32_HI: val = ((s_value + addend - where) >> 32) & 0xffffffff
      elif rtype in (R_AMDGPU_ABS64, R_AMDGPU_ABS32_LO, R_AMDGPU_ABS32, R_AMDGPU_ABS32_HI):
        abs_relocs.append((where, size, s_value + addend))
        full = s_value + addend
        val = (full >> 32 if rtype == R_AMDGPU_ABS32_HI else full) & ((1 << (8 * size)) - 1)
      else:
        raise CodeObjectError(f"{sec.name}: unsupported relocation type {rtype}", entry_off)
      image[where:where + size] = val.to_bytes(size, "little")
  return abs_relocs


def _metadata(elf: ElfFile) -> dict:
  import msgpack
  for sec in elf.sections:
    if sec.type != SHT_NOTE: continue
    for name, ntype, desc, off in notes(elf, elf.section_bytes(sec), sec.offset):
      if name == "AMDGPU" and ntype == NT_AMDGPU_METADATA:
        try:
          md = msgpack.unpackb(desc, raw=False, strict_map_key=False)
        except Exception as e:  # msgpack raises several exception types on corrupt input
          raise CodeObjectError(f"corrupt NT_AMDGPU_METADATA msgpack ({type(e).__name__}: {e})", off) from None
        if not isinstance(md, dict): raise CodeObjectError("NT_AMDGPU_METADATA is not a map", off)
        _check_metadata(md, off)
        return md
  return {}


# The metadata fields hcq reads (AMDGPUUsage "Code Object V3+ Metadata") and the msgpack type each must have: one of
# another type (a bit flip, a hand-made note) is a CodeObjectError here, not a TypeError where a driver uses it.
# "u32": an integer in [0, 2^32) (sizes, offsets and counts are 32-bit in the kernel descriptor and the dispatch
# packet); "dims": the 3 work-group dimensions, each in [1, 1024].
_TOP_FIELDS = {"amdhsa.target": str, "amdhsa.kernels": list}
_KERNEL_FIELDS = {".name": str, ".symbol": str, ".args": list, ".kernarg_segment_size": "u32",
                  ".kernarg_segment_align": "u32", ".group_segment_fixed_size": "u32",
                  ".private_segment_fixed_size": "u32", ".sgpr_count": "u32", ".vgpr_count": "u32",
                  ".wavefront_size": "u32", ".max_flat_workgroup_size": "u32", ".reqd_workgroup_size": "dims"}
_ARG_FIELDS = {".offset": "u32", ".size": "u32", ".value_kind": str, ".name": str, ".type_name": str,
               ".address_space": str, ".access": str, ".pointee_align": "u32"}


def _field_ok(v, kind) -> bool:
  if kind == "u32": return type(v) is int and 0 <= v < 1 << 32
  if kind == "dims": return isinstance(v, list) and len(v) == 3 and all(type(x) is int and 1 <= x <= 1024 for x in v)
  return isinstance(v, kind)


def _check_fields(record: dict, schema: dict, where: str, off: int) -> None:
  for key, kind in schema.items():
    if key in record and not _field_ok(record[key], kind):
      want = {"u32": "an integer in [0, 2^32)", "dims": "3 integers in [1, 1024]"}.get(kind) or f"a {kind.__name__}"
      raise CodeObjectError(f"NT_AMDGPU_METADATA: {where}{key} is {record[key]!r:.60}, not {want}", off)


def _check_metadata(md: dict, off: int) -> None:
  """Check the types of the fields hcq reads; off: the note's file offset (named in the error)."""
  _check_fields(md, _TOP_FIELDS, "", off)
  for i, km in enumerate(md.get("amdhsa.kernels", [])):
    if not isinstance(km, dict): raise CodeObjectError(f"NT_AMDGPU_METADATA: amdhsa.kernels[{i}] is not a map", off)
    if ".name" not in km: raise CodeObjectError(f"NT_AMDGPU_METADATA: amdhsa.kernels[{i}] has no .name", off)
    _check_fields(km, _KERNEL_FIELDS, f"kernel {i} ", off)
    for j, a in enumerate(km.get(".args", [])):
      if not isinstance(a, dict): raise CodeObjectError(f"NT_AMDGPU_METADATA: kernel {i} .args[{j}] is not a map", off)
      _check_fields(a, _ARG_FIELDS, f"kernel {i} .args[{j}] ", off)


def _kernels(elf: ElfFile, image: bytes, syms, md: dict, addrs: dict[int, int]) -> dict[str, Kernel]:
  by_name = {}
  for sym, addr in syms:
    if sym.name: by_name.setdefault(sym.name, (sym, addr))
  entries = md.get("amdhsa.kernels")
  if not entries:  # no metadata: every "<name>.kd" object symbol is a kernel
    entries = [{".name": s.name[:-3], ".symbol": s.name} for s, _ in syms if s.name.endswith(".kd")]
  kernels = {}
  for km in entries:   # their types are checked by _check_metadata
    name = km[".name"]
    kd_sym = km.get(".symbol", f"{name}.kd")
    if kd_sym not in by_name: raise CodeObjectError(f"kernel {name!r}: descriptor symbol {kd_sym!r} not found", None)
    kd_addr = by_name[kd_sym][1]
    # the descriptor and the code must lie in the sections that hold them (a loader reads nothing else); a corrupt
    # address that only falls somewhere in the load image (a gap between sections) is an error, never zeros read
    kd_sec = _section_at(elf, addrs, kd_addr)
    if kd_sec is None or kd_addr + KD_SIZE > kd_sec[1]:
      raise CodeObjectError(f"kernel {name!r}: descriptor {kd_sym!r} at {kd_addr:#x} is not inside a loaded section",
                            None)
    kd = KernelDescriptor.unpack(image[kd_addr:kd_addr + KD_SIZE])
    entry = kd_addr + kd.kernel_code_entry_byte_offset
    code_sec = _section_at(elf, addrs, entry, executable=True)
    if code_sec is None:
      raise CodeObjectError(f"kernel {name!r}: entry {entry:#x} (descriptor at {kd_addr:#x} + "
                            f"{kd.kernel_code_entry_byte_offset:#x}) is not in an executable section", None)
    fn = by_name.get(name)
    end = code_sec[1]                      # the code runs to the end of its section, or of its function symbol
    if fn and fn[1] == entry and fn[0].size: end = min(end, entry + fn[0].size)
    code = image[entry:end]
    args = []
    for a in km.get(".args", []):
      args.append(KernelArg(a.get(".offset", 0), a.get(".size", 0), a.get(".value_kind", ""), a.get(".name"),
                            a.get(".type_name"), a.get(".address_space"), a.get(".access"), a))
    kernels[name] = Kernel(name, kd, kd_addr, entry, code, args, km)
  return kernels


SHF_EXECINSTR = 4   # ELF section flag (System V gABI, elf.h)


def _section_at(elf: ElfFile, addrs: dict[int, int], addr: int, executable: bool = False) -> tuple[int, int] | None:
  """(start, end) in the load image of the loaded section holding addr (an executable one if asked), else None."""
  for sec in elf.sections:
    base = addrs.get(sec.index)
    if base is None or not base <= addr < base + sec.size: continue
    if executable and not sec.flags & SHF_EXECINSTR: continue
    return base, base + sec.size
  return None
