"""Minimal, bounds-checked ELF64 little-endian reader (System V gABI "ELF-64 Object File Format").
Every read goes through _Reader, so truncated or corrupt input raises CodeObjectError naming the byte offset."""
from __future__ import annotations

import struct
from dataclasses import dataclass, field

from .errors import CodeObjectError

EHDR = struct.Struct("<16sHHIQQQIHHHHHH")   # e_ident .. e_shstrndx (64 bytes)
SHDR = struct.Struct("<IIQQQQIIQQ")         # sh_name sh_type sh_flags sh_addr sh_offset sh_size sh_link sh_info sh_addralign sh_entsize
PHDR = struct.Struct("<IIQQQQQQ")           # p_type p_flags p_offset p_vaddr p_paddr p_filesz p_memsz p_align
SYM = struct.Struct("<IBBHQQ")              # st_name st_info st_other st_shndx st_value st_size
RELA = struct.Struct("<QQq")                # r_offset r_info r_addend
NHDR = struct.Struct("<III")                # n_namesz n_descsz n_type

SHT_PROGBITS, SHT_SYMTAB, SHT_STRTAB, SHT_RELA, SHT_NOTE, SHT_NOBITS, SHT_DYNSYM = 1, 2, 3, 4, 7, 8, 11
SHF_ALLOC = 2
ET_REL, ET_EXEC, ET_DYN = 1, 2, 3
EM_AMDGPU = 224


@dataclass
class Section:
  """One ELF section header."""
  index: int
  name: str
  type: int
  flags: int
  addr: int
  offset: int
  size: int
  link: int
  info: int
  addralign: int
  entsize: int
  header_offset: int


@dataclass
class Symbol:
  """One ELF symbol table entry."""
  name: str
  value: int
  size: int
  type: int      # STT_*: 1 OBJECT, 2 FUNC
  bind: int
  other: int
  shndx: int


@dataclass
class ElfFile:
  """A parsed ELF64 file: its header fields and its sections."""
  data: bytes
  ident: bytes
  type: int
  machine: int
  flags: int
  osabi: int
  abiversion: int
  sections: list[Section] = field(default_factory=list)

  def section(self, name: str) -> Section | None:
    return next((s for s in self.sections if s.name == name), None)

  def section_bytes(self, sec: Section) -> bytes:
    if sec.type == SHT_NOBITS: return bytes(sec.size)
    return _Reader(self.data).bytes(sec.offset, sec.size, f"section {sec.name!r} contents")


class _Reader:
  def __init__(self, data: bytes):
    self.data = data

  def bytes(self, off: int, n: int, what: str) -> bytes:
    if off < 0 or n < 0 or off + n > len(self.data):
      raise CodeObjectError(f"truncated ELF: {what} needs bytes {off:#x}..{off + n:#x} but the file has {len(self.data):#x}",
                            off)
    return self.data[off:off + n]

  def unpack(self, st: struct.Struct, off: int, what: str) -> tuple:
    return st.unpack(self.bytes(off, st.size, what))


def _cstr(blob: bytes, off: int, what: str, base: int) -> str:
  if off >= len(blob) and not (off == 0 and not blob):
    raise CodeObjectError(f"{what}: string offset {off:#x} outside its string table", base + off)
  end = blob.find(b"\0", off)
  if end < 0: raise CodeObjectError(f"{what}: unterminated string", base + off)
  return blob[off:end].decode("utf-8", "replace")


def parse_elf(data: bytes) -> ElfFile:
  data = bytes(data)
  r = _Reader(data)
  if len(data) < 4 or data[:4] != b"\x7fELF":
    raise CodeObjectError("not an ELF file (bad magic)", 0)
  (ident, e_type, machine, _ver, _entry, phoff, shoff, flags, ehsize, phentsize, phnum, shentsize, shnum,
   shstrndx) = r.unpack(EHDR, 0, "ELF header")
  if ident[4] != 2: raise CodeObjectError(f"not ELF64 (EI_CLASS {ident[4]})", 4)
  if ident[5] != 1: raise CodeObjectError(f"not little-endian (EI_DATA {ident[5]})", 5)
  elf = ElfFile(data, ident, e_type, machine, flags, ident[7], ident[8])
  if shnum == 0: return elf
  if shentsize != SHDR.size: raise CodeObjectError(f"e_shentsize {shentsize} (expected {SHDR.size})", 0x3a)
  headers = []
  for i in range(shnum):
    off = shoff + i * SHDR.size
    headers.append((off, r.unpack(SHDR, off, f"section header {i}")))
  if shstrndx >= shnum: raise CodeObjectError(f"e_shstrndx {shstrndx} >= section count {shnum}", 0x3e)
  stroff, strh = headers[shstrndx]
  names = r.bytes(strh[4], strh[5], "section name table") if strh[1] != SHT_NOBITS else b""
  for i, (off, h) in enumerate(headers):
    name = _cstr(names, h[0], f"name of section {i}", strh[4]) if names else ""
    sec = Section(i, name, h[1], h[2], h[3], h[4], h[5], h[6], h[7], h[8], h[9], off)
    if sec.type != SHT_NOBITS and sec.size and sec.offset + sec.size > len(data):
      raise CodeObjectError(f"section {name!r} (index {i}) extends past the end of the file: bytes "
                            f"{sec.offset:#x}..{sec.offset + sec.size:#x} of {len(data):#x}", off)
    elf.sections.append(sec)
  return elf


def symbols(elf: ElfFile, sec: Section) -> list[Symbol]:
  r = _Reader(elf.data)
  if sec.link >= len(elf.sections): raise CodeObjectError(f"{sec.name}: sh_link {sec.link} is no section", sec.header_offset)
  strsec = elf.sections[sec.link]
  strtab = elf.section_bytes(strsec)
  out = []
  for i in range(sec.size // SYM.size):
    off = sec.offset + i * SYM.size
    name_off, info, other, shndx, value, size = r.unpack(SYM, off, f"{sec.name} entry {i}")
    out.append(Symbol(_cstr(strtab, name_off, f"{sec.name} entry {i} name", strsec.offset) if strtab else "",
                      value, size, info & 0xf, info >> 4, other, shndx))
  return out


def relocations(elf: ElfFile, sec: Section) -> list[tuple[int, int, int, int, int]]:
  """(entry file offset, r_offset, symbol index, type, addend) of a SHT_RELA section."""
  r = _Reader(elf.data)
  out = []
  for i in range(sec.size // RELA.size):
    off = sec.offset + i * RELA.size
    r_offset, info, addend = r.unpack(RELA, off, f"{sec.name} entry {i}")
    out.append((off, r_offset, info >> 32, info & 0xffffffff, addend))
  return out


def notes(elf: ElfFile, blob: bytes, base: int) -> list[tuple[str, int, bytes, int]]:
  """(name, type, desc, file offset) of each note in a SHT_NOTE blob (4-byte aligned name and desc)."""
  r = _Reader(blob)
  out, off = [], 0
  while off + NHDR.size <= len(blob):
    try:
      namesz, descsz, ntype = r.unpack(NHDR, off, "note header")
      name_off = off + NHDR.size
      desc_off = name_off + ((namesz + 3) & ~3)
      name = r.bytes(name_off, namesz, "note name").rstrip(b"\0").decode("ascii", "replace")
      desc = r.bytes(desc_off, descsz, "note descriptor")
    except CodeObjectError as e:
      raise CodeObjectError(f"corrupt note: {e.args[0].split(' at byte offset')[0]}", base + off) from None
    out.append((name, ntype, desc, base + off))
    off = desc_off + ((descsz + 3) & ~3)
  return out
