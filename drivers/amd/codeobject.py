"""Reading an AMDGPU HSA code object (ELF64, code object v4/v5) for loading: the loadable image with relocations
applied, the kernels' descriptors and their metadata.

Sources: the ELF-64 specification (header, section, program header, symbol, rela layouts); LLVM AMDGPUUsage
("ELF Code Object", "Note Records": NT_AMDGPU_METADATA = 32 in an "AMDGPU" note holding msgpack;
"Relocation Records": R_AMDGPU_ABS32_LO 1, ABS32_HI 2, ABS64 3, REL32 4, REL64 5, ABS32 6, RELATIVE64 13;
"Kernel Descriptor" layout) and llvm/Support/AMDHSAKernelDescriptor.h for the descriptor's field offsets."""
from __future__ import annotations

import dataclasses
import struct

from ...errors import DeviceError

EM_AMDGPU = 224
ET_REL, ET_EXEC, ET_DYN = 1, 2, 3
SHT_SYMTAB, SHT_RELA, SHT_NOBITS, SHT_NOTE, SHT_DYNSYM = 2, 4, 8, 7, 11
SHF_ALLOC = 0x2
PT_LOAD = 1
NT_AMDGPU_METADATA = 32
R_AMDGPU_ABS32_LO, R_AMDGPU_ABS32_HI, R_AMDGPU_ABS64, R_AMDGPU_REL32 = 1, 2, 3, 4
R_AMDGPU_REL64, R_AMDGPU_ABS32, R_AMDGPU_RELATIVE64 = 5, 6, 13
# EF_AMDGPU_MACH (e_flags & 0xff) for the RDNA targets, from LLVM's ELF.h
EF_AMDGPU_MACH = {0x41: "gfx1100", 0x42: "gfx1101", 0x43: "gfx1102", 0x44: "gfx1103", 0x36: "gfx1030",
                  0x4a: "gfx1150", 0x4b: "gfx1151", 0x48: "gfx1200", 0x4e: "gfx1201"}

_EHDR = struct.Struct("<16sHHIQQQIHHHHHH")
_SHDR = struct.Struct("<IIQQQQIIQQ")
_PHDR = struct.Struct("<IIQQQQQQ")
_SYM = struct.Struct("<IBBHQQ")
_RELA = struct.Struct("<QQq")

# AMDHSAKernelDescriptor.h: amdhsa::kernel_descriptor_t (64 bytes)
KD_SIZE = 64
_KD = struct.Struct("<IIIIq20sIIIHH4s")


@dataclasses.dataclass(frozen=True)
class KernelDescriptor:
  group_segment_fixed_size: int
  private_segment_fixed_size: int
  kernarg_size: int
  kernel_code_entry_byte_offset: int
  compute_pgm_rsrc3: int
  compute_pgm_rsrc1: int
  compute_pgm_rsrc2: int
  kernel_code_properties: int
  kernarg_preload: int

  @classmethod
  def parse(cls, raw: bytes) -> "KernelDescriptor":
    g, p, ka, _r0, entry, _r1, r3, r1, r2, props, preload, _r2 = _KD.unpack(raw[:KD_SIZE])
    return cls(g, p, ka, entry, r3, r1, r2, props, preload)

  # kernel_code_properties bits (AMDHSAKernelDescriptor.h KERNEL_CODE_PROPERTY_*)
  @property
  def user_sgprs(self) -> list[tuple[str, int]]:
    """The user SGPRs the descriptor enables, in hardware order, with their dword counts."""
    order = [(0, "private_segment_buffer", 4), (1, "dispatch_ptr", 2), (2, "queue_ptr", 2), (3, "kernarg_segment_ptr", 2),
             (4, "dispatch_id", 2), (5, "flat_scratch_init", 2), (6, "private_segment_size", 1)]
    return [(name, n) for bit, name, n in order if self.kernel_code_properties >> bit & 1]

  @property
  def wave32(self) -> bool: return bool(self.kernel_code_properties >> 10 & 1)

  @property
  def user_sgpr_count(self) -> int:
    """COMPUTE_PGM_RSRC2.USER_SGPR_COUNT [5:1] (gc_11_0_0_sh_mask.h)."""
    return (self.compute_pgm_rsrc2 >> 1) & 0x1F


@dataclasses.dataclass
class Kernel:
  name: str
  symbol: str
  kd_offset: int              # image offset of the kernel descriptor
  kd: KernelDescriptor
  meta: dict                  # the kernel's amdhsa.kernels record


@dataclasses.dataclass
class CodeObject:
  target: str                 # "gfx1100"
  image: bytes                # the loadable image (relocations against base 0 not yet applied)
  relocs: list                # (image offset, type, symbol image offset or None, addend)
  kernels: dict[str, Kernel]
  metadata: dict

  def relocated(self, base: int) -> bytes:
    """The image with its relocations applied for a load at device address `base`."""
    img = bytearray(self.image)
    for off, rtype, sym, addend in self.relocs:
      s = base + (sym or 0)
      p = base + off
      if rtype in (R_AMDGPU_ABS64,): struct.pack_into("<Q", img, off, (s + addend) & (2**64 - 1))
      elif rtype == R_AMDGPU_RELATIVE64: struct.pack_into("<Q", img, off, (base + addend) & (2**64 - 1))
      elif rtype == R_AMDGPU_REL64: struct.pack_into("<Q", img, off, (s + addend - p) & (2**64 - 1))
      elif rtype == R_AMDGPU_REL32: struct.pack_into("<I", img, off, (s + addend - p) & 0xFFFFFFFF)
      elif rtype == R_AMDGPU_ABS32 or rtype == R_AMDGPU_ABS32_LO: struct.pack_into("<I", img, off, (s + addend) & 0xFFFFFFFF)
      elif rtype == R_AMDGPU_ABS32_HI: struct.pack_into("<I", img, off, ((s + addend) >> 32) & 0xFFFFFFFF)
    return bytes(img)


def _err(msg: str) -> DeviceError: return DeviceError(f"code object: {msg}")


def parse(data: bytes) -> CodeObject:
  if len(data) < _EHDR.size or data[:4] != b"\x7fELF": raise _err("not an ELF file")
  if data[4] != 2 or data[5] != 1: raise _err("not a little-endian ELF64 file")
  (_ident, e_type, e_machine, _v, _entry, e_phoff, e_shoff, e_flags, _eh, e_phentsize, e_phnum, e_shentsize, e_shnum,
   e_shstrndx) = _EHDR.unpack_from(data)
  if e_machine != EM_AMDGPU: raise _err(f"e_machine {e_machine} is not EM_AMDGPU ({EM_AMDGPU})")
  if e_type not in (ET_REL, ET_EXEC, ET_DYN): raise _err(f"ELF type {e_type} cannot be loaded")
  try:
    shdrs = [_SHDR.unpack_from(data, e_shoff + i * e_shentsize) for i in range(e_shnum)]
    phdrs = [_PHDR.unpack_from(data, e_phoff + i * e_phentsize) for i in range(e_phnum)]
  except struct.error: raise _err("section or program headers lie outside the file") from None
  def sec_bytes(sh): return data[sh[4]:sh[4] + sh[5]]
  shstr = sec_bytes(shdrs[e_shstrndx]) if e_shstrndx < len(shdrs) else b""
  def cstr(tab, off): return tab[off:tab.index(b"\0", off)].decode()
  names = [cstr(shstr, sh[0]) if shstr else "" for sh in shdrs]

  # metadata from the AMDGPU note
  metadata = None
  for sh in shdrs:
    if sh[1] == SHT_NOTE: metadata = metadata or _read_metadata(sec_bytes(sh))
  if metadata is None: raise _err("no NT_AMDGPU_METADATA note (code object v3+ required)")

  # image layout: section address -> image offset
  if e_type == ET_REL:
    sec_base, size = {}, 0
    for i, sh in enumerate(shdrs):
      if sh[2] & SHF_ALLOC:
        align = max(sh[8], 1)
        size = (size + align - 1) // align * align
        sec_base[i] = size
        size += sh[5]
    img = bytearray(size)
    for i, off in sec_base.items():
      if shdrs[i][1] != SHT_NOBITS: img[off:off + shdrs[i][5]] = sec_bytes(shdrs[i])
  else:
    loads = [p for p in phdrs if p[0] == PT_LOAD]
    if not loads: raise _err("no PT_LOAD segment")
    # PT_LOAD: (type, flags, offset, vaddr, paddr, filesz, memsz, align)
    img = bytearray(max(p[3] + p[6] for p in loads))
    for p in loads: img[p[3]:p[3] + p[5]] = data[p[2]:p[2] + p[5]]
    sec_base = {i: sh[3] for i, sh in enumerate(shdrs) if sh[2] & SHF_ALLOC}

  # symbols: name -> image offset
  syms_by_table: dict[int, list] = {}
  symbols: dict[str, int] = {}
  for i, sh in enumerate(shdrs):
    if sh[1] not in (SHT_SYMTAB, SHT_DYNSYM): continue
    strtab = sec_bytes(shdrs[sh[6]])
    table = []
    raw = sec_bytes(sh)
    for j in range(len(raw) // _SYM.size):
      st_name, _info, _other, shndx, value, _size = _SYM.unpack_from(raw, j * _SYM.size)
      name = cstr(strtab, st_name)
      if e_type == ET_REL: off = sec_base[shndx] + value if shndx in sec_base else None
      else: off = value if shndx else None
      table.append(off)
      if name and off is not None: symbols.setdefault(name, off)
    syms_by_table[i] = table

  relocs = []
  for i, sh in enumerate(shdrs):
    if sh[1] != SHT_RELA: continue
    target = sh[7]
    if e_type == ET_REL and target not in sec_base: continue  # relocations of non-loaded sections (debug info)
    table = syms_by_table.get(sh[6], [])
    raw = sec_bytes(sh)
    for j in range(len(raw) // _RELA.size):
      r_off, r_info, addend = _RELA.unpack_from(raw, j * _RELA.size)
      rtype, sym = r_info & 0xFFFFFFFF, r_info >> 32
      off = sec_base[target] + r_off if e_type == ET_REL else r_off
      if rtype not in (R_AMDGPU_ABS32_LO, R_AMDGPU_ABS32_HI, R_AMDGPU_ABS64, R_AMDGPU_REL32, R_AMDGPU_REL64,
                       R_AMDGPU_ABS32, R_AMDGPU_RELATIVE64, 0):
        raise _err(f"relocation type {rtype} in {names[i]} is not supported")
      if rtype: relocs.append((off, rtype, table[sym] if sym < len(table) else None, addend))

  target = str(metadata.get("amdhsa.target", "")).rsplit("-", 1)[-1].split(":")[0]
  if not target: target = EF_AMDGPU_MACH.get(e_flags & 0xFF, f"mach {e_flags & 0xFF:#x}")
  kernels = {}
  for k in metadata.get("amdhsa.kernels", []):
    sym = k.get(".symbol", k[".name"] + ".kd")
    if sym not in symbols: raise _err(f"kernel {k['.name']}: descriptor symbol {sym} not found")
    off = symbols[sym]
    kd = KernelDescriptor.parse(bytes(img[off:off + KD_SIZE]))
    kernels[k[".name"]] = Kernel(k[".name"], sym, off, kd, k)
  return CodeObject(target, bytes(img), relocs, kernels, metadata)


def _read_metadata(raw: bytes) -> dict | None:
  i = 0
  while i + 12 <= len(raw):
    namesz, descsz, ntype = struct.unpack_from("<III", raw, i)
    name = raw[i + 12:i + 12 + namesz].rstrip(b"\0")
    desc_off = i + 12 + (namesz + 3) // 4 * 4
    desc = raw[desc_off:desc_off + descsz]
    if ntype == NT_AMDGPU_METADATA and name == b"AMDGPU":
      import msgpack
      try: return msgpack.unpackb(desc, raw=False, strict_map_key=False)
      except Exception as e: raise _err(f"the AMDGPU metadata note is not valid msgpack ({e})") from None
    i = desc_off + (descsz + 3) // 4 * 4
  return None
