"""Per-architecture decode tables built once from the generated hcq.autogen.isa.<arch> module."""
from __future__ import annotations

import importlib
from collections.abc import Mapping
from functools import cached_property, lru_cache

# 9-bit source fields that select a trailing 32-bit literal with the value 255 (RDNA3 ISA 16.3: "SRC0 ... 255 = literal")
LITERAL_SOURCES = ("src0", "src1", "src2", "ssrc0", "ssrc1", "srcx0", "srcy0")
# gfx1200: ALU, DS, SMEM, VFLAT/VSCRATCH/VGLOBAL, VBUFFER; gfx942: scalar/vector ALU (incl. MFMA opcodes), SMEM, DS
# and FLAT/SCRATCH/GLOBAL, MUBUF
SUPPORTED_ARCHS = ("gfx1100", "gfx1101", "gfx1102", "gfx1200", "gfx942")
# Processors with gfx1100's instructions and encodings, decoded with its tables (one ArchTables, whose arch stays
# "gfx1100": an Inst names the encoding family). LLVM AMDGPUUsage, "AMDGPU Processors": gfx1100-gfx1103 are the
# "GCN GFX11 (RDNA 3)" processors; AMDGPU.td builds FeatureISAVersion11_0_0/1/2 from the same FeatureISAVersion11_Common
# instruction features, the only differences being FeatureGFX11FullVGPRs (gfx1100, gfx1101: 1536 VGPRs per SIMD)
# and FeatureUserSGPRInit16Bug (gfx1100, gfx1102), neither of which changes an encoding.
SAME_ENCODINGS = {"gfx1101": "gfx1100", "gfx1102": "gfx1100"}


def _make_extractor(fields):
  """A function word -> {field: value} built from the layout (one dict display: ~3x faster than a loop)."""
  items = ", ".join(f"{name!r}: (w >> {lo}) & {mask}" if lo else f"{name!r}: w & {mask}" for name, lo, mask in fields)
  return eval(f"lambda w: {{{items}}}")  # noqa: S307 - the source is built from our own layout table


class _LazyExtra(Mapping):
  """opcode -> the rarely needed per-opcode details (literal/f16 operand sets, source modifiers, returning-atomic
  template, MIMG address counts), each built on first use."""

  def __init__(self, ops: dict):
    self._ops, self._built = ops, {}

  def __getitem__(self, op: int) -> dict:
    x = self._built.get(op)
    if x is None:
      e = self._ops[op]
      x = self._built[op] = dict(lit16=frozenset(e.get("lit16", ())), f16hex=frozenset(e.get("f16hex", ())),
                                 srcmods=e.get("srcmods"),
                                 operands_glc=tuple(e["operands_glc"]) if "operands_glc" in e else None,
                                 vaddr_by_dim=tuple(e.get("vaddr_by_dim", ())),
                                 vaddr_by_dim_a16=tuple(e["vaddr_by_dim_a16"]) if "vaddr_by_dim_a16" in e else None)
    return x

  def __iter__(self): return iter(self._ops)
  def __len__(self) -> int: return len(self._ops)
  def __contains__(self, op) -> bool: return op in self._ops


class EncodingTable:
  __slots__ = ("name", "size", "fields", "field_names", "op_shift", "op_mask", "ops", "layout", "extra", "extract",
               "ident_word")

  def __init__(self, name: str, layout: dict, ops: dict):
    self.name, self.size, self.layout = name, layout["size"], layout
    self.fields = tuple((f, lo, (1 << w) - 1) for f, lo, w in layout["fields"])
    self.field_names = frozenset(f for f, _, _ in self.fields)
    self.ident_word = 0   # the encoding's identifying bits, as asm.encode_fields ORs them into every word
    for lo, _, v in layout["ident"]: self.ident_word |= v << lo
    self.extract = _make_extractor(self.fields)
    opf = [f for f in layout["fields"] if f[0] == layout["op"]][0] if layout["op"] else ("op", 0, 0)
    self.op_shift, self.op_mask = opf[1], (1 << opf[2]) - 1
    self.ops = {}
    for op, e in ops.items():
      srcs = tuple(t[1] for t in e["operands"] if t[0] == "reg" and t[1] in LITERAL_SOURCES)
      self.ops[op] = (e["name"], e["size"], tuple(e["operands"]), srcs)
    self.extra = _LazyExtra(ops)   # opcode -> dict(lit16=frozenset, operands_glc=template or None, ...)
    if name == "EXP": self.ops[0] = ("exp", 8, (), ())


class _LazyEncodings(Mapping):
  """encoding name -> EncodingTable, each built on first use (building all of them costs ~10 ms; a decode of a
  few kernels needs a handful)."""

  def __init__(self, layouts: dict, ops: dict):
    self._layouts, self._ops, self._built = layouts, ops, {}

  def __getitem__(self, enc: str) -> EncodingTable:
    t = self._built.get(enc)
    if t is None:
      layout = self._layouts[enc]      # KeyError for an unknown encoding, as a dict would raise
      t = self._built[enc] = EncodingTable(enc, layout, {} if enc in ("VOPD", "EXP") else self._ops.get(enc, {}))
    return t

  def __iter__(self): return iter(self._layouts)
  def __len__(self) -> int: return len(self._layouts)
  def __contains__(self, enc) -> bool: return enc in self._layouts


class ArchTables:
  def __init__(self, arch: str):
    if arch not in SUPPORTED_ARCHS:
      raise ValueError(f"no instruction tables for {arch!r} (have: {', '.join(SUPPORTED_ARCHS)})")
    arch = SAME_ENCODINGS.get(arch, arch)
    mod = importlib.import_module(f"....autogen.isa.{arch}", __package__)
    self.arch, self.layouts, self.raw = arch, mod.LAYOUTS, mod.OPS
    self.encodings: Mapping[str, EncodingTable] = _LazyEncodings(mod.LAYOUTS, mod.OPS)
    self.sendmsg = getattr(mod, "SENDMSG", {})
    self.sendmsg_rtn = getattr(mod, "SENDMSG_RTN", {})
    self.hwreg = getattr(mod, "HWREG", {})
    self.buf_formats = getattr(mod, "BUF_FORMAT", {})
    self.th_names = getattr(mod, "TH", {})        # gfx12 cache policy names
    self.scope_names = getattr(mod, "SCOPE", {})
    vopd = mod.OPS.get("VOPD", {"X": {}, "Y": {}})
    self.vopd_x = {op: (e["name"], tuple(e["operands"])) for op, e in vopd["X"].items()}
    self.vopd_y = {op: (e["name"], tuple(e["operands"])) for op, e in vopd["Y"].items()}
    # FLAT/SCRATCH/GLOBAL are told apart by SEG (bits 17:16 on gfx11, 15:14 on gfx942) after the dispatch
    self.flat_seg_shift = next((lo for f, lo, _ in mod.LAYOUTS["FLAT"]["fields"] if f == "seg"), 16) \
      if "FLAT" in mod.LAYOUTS else 16
    # the 7-bit FLAT SADDR value printed "off": 0x7c (null) on gfx11, 0x7f on gfx9
    self.saddr_off = 0x7f if arch == "gfx942" else 0x7c
    # dispatch on the top 9 bits of the first dword
    self.dispatch: list[str | None] = self._classify_all()

  @cached_property
  def by_name(self) -> dict[str, tuple[str, int]]:
    """name -> (encoding, opcode) for the assembler (builds every encoding's table: assembler use only)."""
    by_name: dict[str, tuple[str, int]] = {}
    for enc, t in self.encodings.items():
      for op, (name, *_rest) in t.ops.items(): by_name.setdefault(name, (enc, op))
    return by_name

  def _classify_all(self) -> list[str | None]:
    """The encoding of each value of the top 9 bits: the layout whose identifying bits within 31:23 match, the one
    with the most such bits winning (VOP3SD/SCRATCH/GLOBAL share their top bits with VOP3/FLAT)."""
    candidates = []     # (mask, value, width, encoding) over the top 9 bits, in layout order
    for enc, layout in self.layouts.items():
      if enc in ("VOP3SD", "SCRATCH", "GLOBAL"): continue
      mask = value = width = 0
      for lo, w, v in layout["ident"]:
        if lo < 23: continue
        m = ((1 << w) - 1) << (lo - 23)
        mask, value, width = mask | m, value | ((v << (lo - 23)) & m), width + w
      # bits above 31 never match a 9-bit value unless their identifying value is 0
      candidates.append((mask & 0x1FF, value, width, enc, all(lo > 23 for lo, _, _ in layout["ident"])))
    out: list[str | None] = []
    for top in range(512):
      best, best_w, bit23_free = None, -1, False
      for mask, value, width, enc, ident_above_23 in candidates:   # ident_above_23: bit 23 identifies nothing
        if (top & mask) == (value & 0x1FF) and value >> 9 == 0 and width > best_w:
          best, best_w, bit23_free = enc, width, ident_above_23
      if best in ("VOP3P", "VINTERP", "LDSDIR") and bit23_free and top & 1: best = None   # bit 23 must be 0
      out.append(best)
    return out


def arch_tables(arch: str = "gfx1100") -> ArchTables:
  """The decode tables of a target (gfx1101 and gfx1102 share gfx1100's: SAME_ENCODINGS)."""
  return _tables(SAME_ENCODINGS.get(arch, arch))


@lru_cache(maxsize=None)
def _tables(arch: str) -> ArchTables:
  return ArchTables(arch)
