"""ir3 assembler: one line of the disassembler's text -> the 64-bit instruction word, by running the description's
display templates backwards (compiler/isa/ir3/isa.py prints with them).

    from hcq.compiler.isa.ir3.asm import Assembler
    Assembler(630).assemble_line("mov.f32f32 r0.x, c8.x")     # 0x2024400000000020

For each instruction (leaf bitset) whose name occurs in the line, each display template of it and of its ancestors
is matched against the text: literal characters must be equal, {NAME} is the instruction's name, a field takes the
text its type prints (a number, an enum's display string, a flag's display or nothing, or, for a field typed by
another bitset tree, the text of one of that tree's leaves, recursively). Fields the template shows are set from
that text; derived fields (values computed from other fields) and fields the template does not show are what the
search fills in: every combination of the unshown fields of at most HIDDEN_BITS bits in all, smallest values first.
A candidate word is accepted only when the disassembler prints exactly the line back without decode warnings (bits an
<assert> or a don't-care pattern says Mesa's encoder leaves clear), so the assembler can never return a word that means
something else; a line no candidate reproduces is an AsmError naming it. "raw 0x<hex>" is that word (Mesa 25's
ir3_parser.y raw_instr).
"""
from __future__ import annotations

import itertools
import re
import struct

from .isa import ISA, Bitset, DecodeError

HIDDEN_BITS = 12          # the search over fields a template does not show stops at 2^12 combinations
NESTED_CANDIDATES = 8     # words tried per reading of an operand (a field typed by another bitset tree)
_NUM = {
  "uint": re.compile(r"\d+"), "int": re.compile(r"-?\d+"), "branch": re.compile(r"-?\d+"),
  "hex": re.compile(r"\d+"),       # canonical text writes every number in decimal (see canonical())
  "offset": re.compile(r"[+-]\d+"), "uoffset": re.compile(r"\+\d+"),
  "float": re.compile(r"-?(?:\d+\.\d+(?:e[-+]\d+)?|inf|nan)"),
}


class AsmError(Exception):
  pass


def _c_float_bits(text: str, width: int) -> int:
  v = float(text)
  return struct.unpack("<H", struct.pack("<e", v))[0] if width == 16 else struct.unpack("<I", struct.pack("<f", v))[0]


class Assembler:
  def __init__(self, gpu_id: int = 630, isa: ISA | None = None):
    self.isa = isa or ISA(gpu_id)
    self.gpu_id = self.isa.gpu_id
    self.debug = False
    self._field_cache: dict = {}
    self._template_cache: dict = {}

  # ---- the fields of a bitset ----
  def _fields(self, b: Bitset, case: dict | None = None) -> dict[str, dict]:
    """Every field a bitset or its ancestors define (in any case): name -> field, the nearest bitset's definition
    first, as the disassembler looks fields up (isa.py find_field). With a template's case, that case's fields come
    first at the level of the bitset it belongs to (a field a parent's template shows may be defined again nearer
    the leaf, e.g. Mesa 25's ldib.b/stib.b OFFSET: "#zero" in the ibo base, OFFSET_HI/OFFSET_LO in load-store)."""
    key = (id(b), id(case))
    got = self._field_cache.get(key)
    if got is not None: return got
    out: dict[str, dict] = {}
    x = b
    while x is not None:
      if case is not None and case.get("owner") == x.name:
        for n, f in case["fields"].items(): out.setdefault(n, f)
      for c in x.cases:
        for n, f in c["fields"].items(): out.setdefault(n, f)
      x = x.parent
    self._field_cache[key] = out
    return out

  def _templates(self, b: Bitset) -> list[tuple[str, dict]]:
    """(display template, the case it belongs to, with "owner": the bitset's name) of b and its ancestors, nearest
    first (computed once per leaf)."""
    got = self._template_cache.get(id(b))
    if got is not None: return got
    out, x = [], b
    while x is not None:
      shown = [c for c in x.cases if c["display"] is not None]
      for c in shown:
        out.append((c["display"], {**c, "owner": x.name}))
        # an override with fields but no display of its own shows its fields with a later case's template
        # (the field is looked up in the first case that applies; the template in the first that has one); several
        # such overrides may apply together (Mesa 25's alias: {SCOPE} == 1 gives DST, {SRC_REG_TYPE} == 1 gives
        # SRC), so every combination of them, the earlier override's field first as the lookup takes it
        quiet = [o for o in x.cases if o["display"] is None and o["expr"] is not None and o["fields"]]
        for n in range(1, min(len(quiet), 4) + 1):
          for combo in itertools.combinations(quiet, n):
            fields = dict(c["fields"])
            for o in reversed(combo): fields.update(o["fields"])
            out.append((c["display"], {**c, "fields": fields, "owner": x.name}))
      x = x.parent
    self._template_cache[id(b)] = out
    return out

  # ---- matching text against a template ----
  def _match(self, b: Bitset, parts: list, text: str, pos: int, env: dict, outer: dict | None = None,
             case: dict | None = None):
    """Yield (pos, env) for every way parts (of b's template) can read text from pos; env: field -> value. outer:
    the fields of the enclosing bitset a nested one refers to through <param> (name as seen here -> field)."""
    if not parts:
      yield pos, env
      return
    head, rest = parts[0], parts[1:]
    if head[0] == "lit":
      if text.startswith(head[1], pos): yield from self._match(b, rest, text, pos + len(head[1]), env, outer, case)
      return
    name = head[1]
    if name == "":     # an alignment: spaces
      p = pos
      while p < len(text) and text[p] == " ": p += 1
      yield from self._match(b, rest, text, p, env, outer, case)
      return
    if name == "NAME":
      if text.startswith(b.name, pos): yield from self._match(b, rest, text, pos + len(b.name), env, outer, case)
      return
    f = self._fields(b, case).get(name)
    param = f is None
    if param: f = (outer or {}).get(name)   # a field of the enclosing bitset: the top-level search sets it
    if f is None: return
    for end, value in self._field_texts(f, text, pos, self._fields(b) if not param else None):
      if not param and value is not None and f["expr"] is not None and f["type"] not in ("bool", "bool_inv") \
         and self._invertible(f["expr"]) is not None:
        # a derived number made of fields ({HI} << 8 | {LO}): recorded, split into its fields when the word is made
        if name in env and env[name] != value: continue
        yield from self._match(b, rest, text, end, {**env, name: value}, outer, case)
        continue
      if param or value is None or f["expr"] is not None:     # derived or outer: left to the search and the check
        yield from self._match(b, rest, text, end, env, outer, case)
        continue
      if name in env and env[name] != value: continue
      yield from self._match(b, rest, text, end, {**env, name: value}, outer, case)

  def _field_texts(self, f: dict, text: str, pos: int, fields: dict | None = None):
    """(end, value) for each reading of the field's text at pos (value None: any); fields: those of the bitset
    that defines f (what its <param>s name)."""
    t, width = f["type"], f["high"] - f["low"] + 1
    if t == "bool":
      if f["display"] is None:
        if pos < len(text) and text[pos] in "01": yield pos + 1, int(text[pos])
        return
      if f["display"] and text.startswith(f["display"], pos): yield pos + len(f["display"]), 1
      yield pos, 0
      return
    if t == "bool_inv":       # Mesa 25: shown (its display, or !value) when the bit is clear
      if f["display"] is None:
        if pos < len(text) and text[pos] in "01": yield pos + 1, 1 - int(text[pos])
        return
      if f["display"] and text.startswith(f["display"], pos): yield pos + len(f["display"]), 0
      yield pos, 1
      return
    if t == "absbranch": t = "int"
    if t in _NUM:
      if t in ("offset", "uoffset"): yield pos, 0      # zero prints nothing
      m = _NUM[t].match(text, pos)
      if not m: return
      s = m.group(0)
      if t == "float":
        try: yield m.end(), _c_float_bits(s, width if width in (16, 32) else 32)
        except (OverflowError, ValueError): pass
        return
      v = int(s)
      yield m.end(), v & ((1 << width) - 1) if f["expr"] is None else v
      return
    if t in self.isa.enums:
      for v, disp in sorted(self.isa.enums[t].items(), key=lambda kv: -len(kv[1])):
        if text.startswith(disp, pos): yield pos + len(disp), v
      m = re.compile(r"\d+").match(text, pos)
      if m: yield m.end(), int(m.group(0))
      return
    if t in self.isa.bitsets:
      outer = {alias: (fields or {}).get(name) for name, alias in f["params"]}
      outer = {k: v for k, v in outer.items() if v is not None}
      for leaf in self.isa.leaves.get(t, ()):
        if not leaf.gen[0] <= self.gpu_id <= leaf.gen[1]: continue
        for tpl, case in self._templates(leaf):
          for end, env in self._match(leaf, _parse_template(tpl), text, pos, {}, outer, case):
            # an operand's unshown fields: the first few combinations only (the top level checks every word)
            for word in itertools.islice(self._complete(leaf, env, case), NESTED_CANDIDATES):
              yield end, word

  # ---- from field values to words ----
  def _invertible(self, expr: str):
    """[(field, shift)] when the expression is an OR of fields each shifted left by a constant, else None."""
    terms = []
    for term in self.isa.expr_text[expr].split("|"):
      m = re.fullmatch(r"\s*\(?\s*\{(\w+)\}\s*(?:<<\s*(\d+))?\s*\)?\s*", term)
      if not m: return None
      terms.append((m.group(1), int(m.group(2) or 0)))
    return terms

  def _encode_consts(self, b: Bitset) -> dict:
    out: dict = {}
    while b is not None:
      for k, v in b.data.get("encode", {}).items(): out.setdefault(k, v)
      b = b.parent
    return out

  def _complete(self, b: Bitset, env: dict, case: dict):
    """Words of b's size with the shown fields of env and the bits the template's case asserts, the hidden small
    fields enumerated (smallest first)."""
    fields = {k: v for k, v in self._fields(b, case).items() if "assert" not in v}
    env = dict(env)
    for n, v in list(env.items()):    # derived numbers -> the fields they are made of
      f = fields[n]
      if f["expr"] is None: continue
      del env[n]
      v &= (1 << (f["high"] - f["low"] + 1)) - 1 if f["high"] else (1 << 64) - 1
      for part, shift in self._invertible(f["expr"]) or ():
        pf = fields.get(part)
        if pf is None: continue
        env[part] = (v >> shift) & ((1 << (pf["high"] - pf["low"] + 1)) - 1)
    for n, (v, forced) in self._encode_consts(b).items():   # what the encoder always writes there
      if n in fields and n not in env and fields[n]["expr"] is None: env[n] = v
    word = b.match
    for n, v in env.items():
      f = fields[n]
      word |= (v & ((1 << (f["high"] - f["low"] + 1)) - 1)) << f["low"]
    defined = b.mask
    for n in env:
      f = fields[n]
      if f["expr"] is None: defined |= ((1 << (f["high"] - f["low"] + 1)) - 1) << f["low"]
    for f in case["fields"].values():
      if "assert" in f:
        m = ((1 << (f["high"] - f["low"] + 1)) - 1) << f["low"]
        word = (word & ~m) | (f["assert"] << f["low"])
        defined |= m
    hidden, bits = [], 0
    for n, f in fields.items():
      if f["expr"] is not None or n in env or "assert" in f: continue
      m = ((1 << (f["high"] - f["low"] + 1)) - 1) << f["low"]
      if m & defined: continue
      defined |= m
      hidden.append(f)
      bits += f["high"] - f["low"] + 1
    small = [f for f in hidden if f["high"] - f["low"] + 1 <= 4] if bits > HIDDEN_BITS else hidden
    total = sum(f["high"] - f["low"] + 1 for f in small)
    if total > HIDDEN_BITS: small = small[:0]
    ranges = [range(1 << (f["high"] - f["low"] + 1)) for f in small]
    for combo in sorted(itertools.product(*ranges), key=lambda c: (sum(1 for x in c if x), c)):
      w = word
      for f, v in zip(small, combo): w |= v << f["low"]
      yield w

  def assemble_line(self, line: str) -> int:
    try: return self._assemble_line(line)
    except (ValueError, OverflowError) as e:     # e.g. a number of thousands of digits (int() refuses it)
      raise AsmError(f"cannot assemble {line[:200]!r}: {e}") from None

  def _assemble_line(self, line: str) -> int:
    # "raw 0x<hex>": the word itself (Mesa 25's ir3_lexer.l: strtoull of the text after "raw ", which saturates at
    # 2^64 - 1; ir3_parser.y raw_instr: an OPC_META_RAW instruction of that value)
    m = re.fullmatch(r"raw 0x([0-9a-fA-F]*)", line.split("//")[0].split(";")[0].strip())
    if m: return min(int(m.group(1) or "0", 16), (1 << 64) - 1)
    text = canonical(line)
    tried = 0
    for leaf in self.isa.leaves["#instruction"]:
      if not leaf.gen[0] <= self.gpu_id <= leaf.gen[1]: continue
      for tpl, case in self._templates(leaf):
        for end, env in self._match(leaf, _parse_template(tpl), text, 0, {}, None, case):
          if end != len(text): continue
          for word in self._complete(leaf, env, case):
            tried += 1
            try: got = canonical(self.isa.disasm_word(word))
            except DecodeError: continue
            # a word whose bits contradict the description's <assert>s (or set don't-care bits) prints the same
            # text but with Mesa's decode warnings: not what Mesa's encoder writes (e.g. ldib.b with an offset and
            # HAS_OFFSET clear)
            if got == text and not self.isa.errors: return word
            if self.debug: print(f"  {leaf.name}: {word:016x} -> {got!r}")
    raise AsmError(f"cannot assemble {line!r} for gpu {self.gpu_id} ({tried} candidate words tried)")

  def assemble(self, text: str) -> bytes:
    """A program -> little-endian instruction words. Comments after ';' or '//' and blank lines are dropped, lines
    starting with '@' are loader directives (computerator's headers: the loader reads them) and are skipped, a line
    "NAME:" labels the next instruction and "#NAME" in an operand is that instruction's offset from the one that
    names it (a branch target, in instructions)."""
    lines, labels = [], {}
    for n, raw in enumerate(text.splitlines(), 1):
      line = raw.split("//")[0].split(";")[0].strip()
      if not line or line.startswith("@"): continue
      m = re.match(r"^([A-Za-z_]\w*):\s*(.*)$", line)
      if m:
        if m.group(1) in labels: raise AsmError(f"line {n}: label {m.group(1)!r} defined twice")
        labels[m.group(1)] = len(lines)
        line = m.group(2)
        if not line: continue
      lines.append((n, line))
    out = []
    for i, (n, line) in enumerate(lines):
      def target(mm):
        if mm.group(1) not in labels: raise AsmError(f"line {n}: no label {mm.group(1)!r}")
        return f"#{labels[mm.group(1)] - i}"
      line = re.sub(r"#([A-Za-z_]\w*)", target, line)
      try: out.append(struct.pack("<Q", self.assemble_line(line)))
      except AsmError as e: raise AsmError(f"line {n}: {e}") from None
    return b"".join(out)


_TEMPLATES: dict[str, list] = {}


def canonical(text: str) -> str:
  """One instruction's text in the form both sides are compared in: comments dropped, blanks collapsed, flags written
  after the mnemonic moved before it ("nop(sy)" -> "(sy)nop", as Mesa's assembler also accepts), no blanks inside
  [...] and no "+0" offset there, every number in decimal (0x10 -> 16) and every decimal fraction as python's
  shortest float text (0.500000 -> 0.5)."""
  text = text.split("//")[0].split(";")[0].strip()
  text = " ".join(text.split())
  m = re.match(r"^((?:\([a-z0-9]+\))*)([A-Za-z_][\w.]*)((?:\([a-z0-9]+\))+)(\s|$)", text)
  if m: text = m.group(1) + m.group(3) + m.group(2) + text[m.end(3):]
  text = re.sub(r"\[([^\]]*)\]", lambda mm: "[" + mm.group(1).replace(" ", "") + "]", text)
  text = re.sub(r"\+0\]", "]", text)
  text = re.sub(r"\b0x([0-9a-fA-F]+)\b", lambda mm: str(int(mm.group(1), 16)), text)
  text = re.sub(r"(?<![\w.])(\d+\.\d+)(?![\w.])", lambda mm: repr(float(mm.group(1))), text)
  return text


def _parse_template(tpl: str) -> list:
  """A display template as [("lit", text) | ("field", name)] ({F:align=N} becomes an alignment, then the field);
  a literal "0x" before a field is dropped (canonical text has the number in decimal)."""
  got = _TEMPLATES.get(tpl)
  if got is not None: return got
  parts, i = [], 0
  while i < len(tpl):
    if tpl[i] == "{":
      j = tpl.index("}", i)
      name, _, align = tpl[i + 1:j].partition(":align=")
      if align: parts.append(("field", ""))
      if name: parts.append(("field", name))
      i = j + 1
    else:
      j = tpl.find("{", i)
      j = len(tpl) if j < 0 else j
      lit = tpl[i:j]
      if j < len(tpl) and lit.endswith("0x"): lit = lit[:-2]
      if lit: parts.append(("lit", lit))
      i = j
  _TEMPLATES[tpl] = parts
  return parts
