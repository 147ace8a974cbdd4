"""Fast assembly of lines that differ only in their registers and a few numbers: the assembler's words, re-used.

A line is split into a shape and values: every register rN.c / hrN.c (its regid, 8 bits), every "+N]" offset of a
memory operand (12 bits: ldp/stp offsets are 13-bit signed) and the immediate of "mov.u32u32 rX, N" (32 bits) become
slots. For a shape met often enough (TEMPLATE_AFTER lines), the assembler (asm.py) encodes the line with every slot
0 and with each slot bit set alone: an instruction field of the ISA holds each of these values in plain bits
(#reg-gpr's GPR and SWIZ, cat6's OFF split in two parts, cat1's IMMED), so bit b of a slot flips a fixed set of word
bits, and any value's word is the base word with those flips. A template is kept only if it reproduces, for a value with every bit set and for the
first lines it was built from, exactly the assembler's word (so it never returns a word the assembler would not);
otherwise that shape stays with the assembler. The flips of a slot are applied a byte of its value at a time (a
table of the 256 combinations of each byte's 8 flips, made with the template).

A caller that knows a line's shape and values (the ir3 backend's instruction selector builds them with the text)
passes them to encode_split, which is encode without parsing the text."""
from __future__ import annotations

import re

TEMPLATE_AFTER = 12       # lines of one shape assembled one by one before its template is built (a template costs
                          # one assembly per slot bit: about as many as a dozen lines)
_TOKEN = re.compile(r"(?P<imm>(?<=mov\.u32u32 )(?P<dst>h?r\d+\.[xyzw]), (?P<iv>\d+)$)|"
                    r"(?P<reg>\b(?P<h>h?)r(?P<n>\d+)\.(?P<c>[xyzw]))|(?P<off>\+(?P<ov>\d+)(?=\]))")
_WIDTH = {"r": 8, "h": 8, "off": 12, "imm": 32}


def split(line: str):
  """(shape, values): the shape a tuple of literal text and slot kinds ("r", "h", "off", "imm")."""
  parts, values, pos = [], [], 0
  for m in _TOKEN.finditer(line):
    parts.append(line[pos:m.start()])
    if m.group("reg"):
      parts.append("h" if m.group("h") else "r")
      values.append(int(m.group("n")) * 4 + "xyzw".index(m.group("c")))
    elif m.group("off"):
      parts.append("off")
      values.append(int(m.group("ov")))
    else:   # mov.u32u32 dst, imm: the destination is a register slot too
      dst = m.group("dst")
      h = dst.startswith("h")
      n, c = dst[1 + h:].split(".")
      parts += ["h" if h else "r", ", ", "imm"]
      values += [int(n) * 4 + "xyzw".index(c), int(m.group("iv"))]
    pos = m.end()
  parts.append(line[pos:])
  return tuple(parts), values


def render(shape, values) -> str:
  out, it = [], iter(values)
  for i, p in enumerate(shape):
    if i % 2 == 0 or p not in _WIDTH:
      out.append(p)
      continue
    v = next(it)
    if p == "r": out.append(f"r{v >> 2}.{'xyzw'[v & 3]}")
    elif p == "h": out.append(f"hr{v >> 2}.{'xyzw'[v & 3]}")
    elif p == "off": out.append(f"+{v}" if v else "")
    else: out.append(str(v))
  return "".join(out)


def _byte_tables(masks: list) -> list:
  """For flip masks of bits 0..n-1: per byte of the value, the XOR of the flips of each of its 256 values."""
  out = []
  for lo in range(0, len(masks), 8):
    m = masks[lo:lo + 8]
    t = [0] * (1 << len(m))
    for v in range(1, len(t)):
      low = v & -v
      t[v] = t[v ^ low] ^ m[low.bit_length() - 1]
    out.append(t)
  return out


class TemplateEncoder:
  def __init__(self, assembler):
    self.asm = assembler
    self.seen: dict = {}        # shape -> [(values, word)] assembled one by one
    self.templates: dict = {}   # shape -> (base word, [[flip mask per bit] per slot]) or None (stays assembled)
    self.tables: dict = {}      # shape -> (base word, [(slot width, [byte tables])]) for the templates kept

  def encode(self, line: str) -> int:
    shape, values = split(line)
    return self.encode_split(line, shape, values)

  def encode_split(self, line: str, shape: tuple, values) -> int:
    """The word of `line`, whose split() is (shape, values)."""
    t = self.tables.get(shape)
    if t is not None:
      w, slots = t
      for v, (width, tabs) in zip(values, slots):
        if v >> width: return self.asm.assemble_line(line)     # a value wider than the slot: the assembler says
        for tab in tabs:
          w ^= tab[v & 0xFF]
          v >>= 8
      return w
    w = self.asm.assemble_line(line)
    if values and self.templates.get(shape, False) is False:
      seen = self.seen.setdefault(shape, [])
      seen.append((values, w))
      if len(seen) >= TEMPLATE_AFTER:
        t = self.templates[shape] = self._build(shape, seen)
        if t: self.tables[shape] = (t[0], [(len(masks), _byte_tables(masks)) for masks in t[1]])
    return w

  def _build(self, shape, seen):
    from .asm import AsmError
    kinds = [p for i, p in enumerate(shape) if i % 2 == 1 and p in _WIDTH]
    try:
      zero = [0] * len(kinds)
      base = self.asm.assemble_line(render(shape, zero))
      flips = []
      for k, kind in enumerate(kinds):
        masks = []
        for b in range(_WIDTH[kind]):
          vals = list(zero)
          vals[k] = 1 << b
          masks.append(self.asm.assemble_line(render(shape, vals)) ^ base)
        flips.append(masks)
    except AsmError:
      return None
    t = (base, flips)
    full = [(1 << _WIDTH[k]) - 1 if k == "imm" else (0xBF if k in "rh" else 0xFFF) for k in kinds]
    checks = [(full, None)] + seen
    for vals, want in checks:
      try: want = self.asm.assemble_line(render(shape, vals)) if want is None else want
      except AsmError: continue
      w = base
      for v, masks in zip(vals, flips):
        for b in range(len(masks)):
          if v >> b & 1: w ^= masks[b]
      if w != want: return None
    return t
