"""Per-architecture decode tables built once from the generated hcq.autogen.isa.<arch> module."""
from __future__ import annotations

import importlib
from functools import lru_cache

# 9-bit source fields that select a trailing 32-bit literal with the value 255 (RDNA3 ISA 16.3: "SRC0 ... 255 = literal")
LITERAL_SOURCES = ("src0", "src1", "src2", "ssrc0", "ssrc1", "srcx0", "srcy0")
# gfx1200: ALU, DS, SMEM, VFLAT/VSCRATCH/VGLOBAL, VBUFFER; gfx942: scalar/vector ALU (incl. MFMA opcodes) and SMEM
SUPPORTED_ARCHS = ("gfx1100", "gfx1200", "gfx942")


def _make_extractor(fields):
  """A function word -> {field: value} built from the layout (one dict display: ~3x faster than a loop)."""
  items = ", ".join(f"{name!r}: (w >> {lo}) & {mask}" if lo else f"{name!r}: w & {mask}" for name, lo, mask in fields)
  return eval(f"lambda w: {{{items}}}")  # noqa: S307 - the source is built from our own layout table


class EncodingTable:
  __slots__ = ("name", "size", "fields", "op_shift", "op_mask", "ops", "layout", "extra", "extract")

  def __init__(self, name: str, layout: dict, ops: dict):
    self.name, self.size, self.layout = name, layout["size"], layout
    self.fields = tuple((f, lo, (1 << w) - 1) for f, lo, w in layout["fields"])
    self.extract = _make_extractor(self.fields)
    opf = [f for f in layout["fields"] if f[0] == layout["op"]][0] if layout["op"] else ("op", 0, 0)
    self.op_shift, self.op_mask = opf[1], (1 << opf[2]) - 1
    self.ops = {}
    self.extra = {}   # opcode -> dict(lit16=frozenset, operands_glc=template or None)
    for op, e in ops.items():
      srcs = tuple(t[1] for t in e["operands"] if t[0] == "reg" and t[1] in LITERAL_SOURCES)
      self.ops[op] = (e["name"], e["size"], tuple(e["operands"]), srcs)
      self.extra[op] = dict(lit16=frozenset(e.get("lit16", ())), f16hex=frozenset(e.get("f16hex", ())), srcmods=e.get("srcmods"),
                            operands_glc=tuple(e["operands_glc"]) if "operands_glc" in e else None,
                            vaddr_by_dim=tuple(e.get("vaddr_by_dim", ())))
    if name == "EXP": self.ops[0] = ("exp", 8, (), ())


class ArchTables:
  def __init__(self, arch: str):
    if arch not in SUPPORTED_ARCHS:
      raise ValueError(f"no instruction tables for {arch!r} (have: {', '.join(SUPPORTED_ARCHS)})")
    mod = importlib.import_module(f"....autogen.isa.{arch}", __package__)
    self.arch, self.layouts, self.raw = arch, mod.LAYOUTS, mod.OPS
    self.encodings: dict[str, EncodingTable] = {}
    for enc, layout in mod.LAYOUTS.items():
      if enc in ("VOPD", "EXP"): ops = {}
      else: ops = mod.OPS.get(enc, {})
      self.encodings[enc] = EncodingTable(enc, layout, ops)
    self.sendmsg = getattr(mod, "SENDMSG", {})
    self.sendmsg_rtn = getattr(mod, "SENDMSG_RTN", {})
    self.hwreg = getattr(mod, "HWREG", {})
    self.buf_formats = getattr(mod, "BUF_FORMAT", {})
    self.th_names = getattr(mod, "TH", {})        # gfx12 cache policy names
    self.scope_names = getattr(mod, "SCOPE", {})
    vopd = mod.OPS.get("VOPD", {"X": {}, "Y": {}})
    self.vopd_x = {op: (e["name"], tuple(e["operands"])) for op, e in vopd["X"].items()}
    self.vopd_y = {op: (e["name"], tuple(e["operands"])) for op, e in vopd["Y"].items()}
    # dispatch on the top 9 bits of the first dword; FLAT/SCRATCH/GLOBAL are told apart by SEG (bits 17:16) later
    self.dispatch: list[str | None] = [self._classify_top(t) for t in range(512)]
    # name -> (encoding, opcode) for the assembler
    self.by_name: dict[str, tuple[str, int]] = {}
    for enc, t in self.encodings.items():
      for op, (name, *_rest) in t.ops.items(): self.by_name.setdefault(name, (enc, op))

  def _classify_top(self, top: int) -> str | None:
    word = top << 23
    best, best_w = None, -1
    for enc, layout in self.layouts.items():
      if enc in ("VOP3SD", "SCRATCH", "GLOBAL"): continue
      idents = [i for i in layout["ident"] if i[0] >= 23]
      if all(((word >> lo) & ((1 << w) - 1)) == v for lo, w, v in idents):
        width = sum(w for _, w, _ in idents)
        if width > best_w: best, best_w = enc, width
    if best in ("VOP3P", "VINTERP", "LDSDIR") and all(lo > 23 for lo, _, _ in self.layouts[best]["ident"]):
      if (word >> 23) & 1: return None  # identified by bits 31:24 (gfx11/12): bit 23 must be 0
    return best


@lru_cache(maxsize=None)
def arch_tables(arch: str = "gfx1100") -> ArchTables:
  return ArchTables(arch)
