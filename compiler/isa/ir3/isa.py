"""The ir3 instruction set (Adreno shader ISA) as Mesa's isaspec describes it, interpreted: decode an instruction word
into its bitset (instruction) and fields, and print it the way the description's display templates say.

    from hcq.compiler.isa.ir3.isa import ISA
    isa = ISA(gpu_id=630)
    isa.disasm_word(0x20244000_00000020)      # 'mov.f32f32 r0.x, c8.x'

The tables come from autogen/qcom/ir3_isa.py (generated from Mesa 25.0.7's src/freedreno/isa/ir3*.xml). The rules
followed are isaspec's, as Mesa's src/compiler/isaspec/README.rst documents them (and isaspec_decode_impl.c does):
- bitsets form trees (extends); a leaf matches a word when (word & mask & ~dontcare) == match, the masks being the
  union of its own <pattern>s and its ancestors'; a bitset restricted by <gen min/max> matches only for gpu ids in
  that range; a field whose type is another tree's root is decoded by the leaf of that tree its bits match;
- a bitset's cases are its <override>s (taken when their expression is non-zero) and then its default case; a field
  or display template is looked up in the first case that applies, then in the parent bitset; while an expression is
  being evaluated, the override it belongs to is assumed to apply (overrides may refer to their own fields);
- <param name=X as=Y> lets a nested bitset refer to the enclosing scope's field X as Y;
- display: {NAME} is the bitset's name, {F} a field printed by its type (int/branch: signed decimal; uint: decimal;
  hex; offset: signed with its sign, nothing for 0; uoffset: "+n", nothing for 0; float: %f of the f16/f32 bits;
  bool: its display string when set (else nothing), or 0/1 without one; bool_inv (Mesa 25): the same when clear;
  absbranch: as int; custom: nothing (ir3 sets no field_print_cb); an enum: the display of its value, else the
  number; a bitset type: that bitset's own display), {F:align=N} pads to column N first;
- expressions may call ISA_GPU_ID() (Mesa 25): the generation's gpu id the decoder is for (chip * 100).
"""
from __future__ import annotations

import struct

from .expr import GPU_ID, compile_expr

WORD_BITS = 64
MAX_ERRORS = 4      # struct decode_state's errors[4] (Mesa 25 isaspec_decode_impl.c)


class DecodeError(Exception):
  pass


def generation_gpu_id(gpu_id: int) -> int:
  """The gpu id Mesa 25's ir3 decoder is given for an Adreno of this gpu id: its generation (chip) times 100."""
  return gpu_id // 100 * 100


def _sext(v: int, width: int) -> int:
  v &= (1 << width) - 1
  return v - (1 << width) if width and v >> (width - 1) else v


def _half_to_float(bits: int) -> float:
  return struct.unpack("<e", struct.pack("<H", bits & 0xFFFF))[0]


def _c_f(x: float) -> str:
  """C's printf("%f")."""
  if x != x: return "-nan" if struct.pack("<d", x)[0:8][7] & 0x80 else "nan"
  if x in (float("inf"), float("-inf")): return "inf" if x > 0 else "-inf"
  return "%f" % x


class Bitset:
  __slots__ = ("name", "parent", "size", "gen", "match", "dontcare", "mask", "cases", "data")

  def __init__(self, data: dict, parent: "Bitset | None"):
    self.name, self.parent, self.data = data["name"], parent, data
    self.size = data["size"] if data["size"] is not None else parent.size
    lo, hi = data["gen"]
    if parent is not None: lo, hi = max(lo, parent.gen[0]), min(hi, parent.gen[1])
    self.gen = (lo, hi)
    self.match, self.dontcare, self.mask = data["match"], data["dontcare"], data["mask"]
    if parent is not None:
      self.match |= parent.match
      self.dontcare |= parent.dontcare
      self.mask |= parent.mask
    self.cases = data["cases"]

  def root(self) -> "Bitset":
    return self if self.parent is None else self.parent.root()

  def matches(self, val: int, gpu_id: int) -> bool:
    return self.gen[0] <= gpu_id <= self.gen[1] and (val & self.mask & ~self.dontcare) == self.match


class Decoded:
  """An instruction (or operand) decoded: its bitset name, its raw bits and its fields' values."""
  __slots__ = ("name", "word", "fields")

  def __init__(self, name: str, word: int, fields: dict):
    self.name, self.word, self.fields = name, word, fields

  def __getitem__(self, key): return self.fields[key]
  def get(self, key, default=None): return self.fields.get(key, default)
  def __repr__(self): return f"Decoded({self.name!r}, {self.fields!r})"


class _Scope:
  __slots__ = ("isa", "bitset", "val", "params", "parent", "cache", "out")

  def __init__(self, isa: "ISA", bitset: Bitset, val: int, params, parent):
    self.isa, self.bitset, self.val, self.params, self.parent = isa, bitset, val, params, parent
    self.cache: dict = {}


class ISA:
  def __init__(self, gpu_id: int = 630, tables=None):
    if tables is None:
      from ....autogen.qcom import ir3_isa as tables
    # Mesa 25 decodes for the chip's generation times 100 (ir3/tests/disasm.c main() and isa/ir3-disasm.c pass
    # `.gpu_id = dev_info->chip * 100`): 630 and 660 decode as 600, a730/a740 as 700
    self.requested_gpu_id = gpu_id
    self.gpu_id = generation_gpu_id(gpu_id)
    self.enums = tables.ENUMS
    self.exprs = {name: compile_expr(text) for name, text in tables.EXPRS.items()}
    self.expr_text = tables.EXPRS
    raw = tables.BITSETS
    plain = {n: d for n, d in raw.items() if isinstance(d, dict)}   # names with one bitset (parents are such)
    built: dict[str, Bitset] = {}

    def get(name: str) -> Bitset:
      if name not in built:
        d = plain[name]
        built[name] = Bitset(d, get(d["extends"]) if d["extends"] else None)
      return built[name]
    parents = {d["extends"] for v in raw.values() for d in (v if isinstance(v, list) else [v]) if d["extends"]}
    self.leaves: dict[str, list[Bitset]] = {}   # root name -> its leaves
    self.bitsets: dict[str, list[Bitset]] = {}
    for name, v in raw.items():
      for d in (v if isinstance(v, list) else [v]):
        b = Bitset(d, get(d["extends"]) if d["extends"] else None) if isinstance(v, list) else get(name)
        self.bitsets.setdefault(name, []).append(b)
        if name not in parents: self.leaves.setdefault(b.root().name, []).append(b)
    self.stack: list = []
    self.errors: list[str] = []

  def error(self, text: str) -> None:
    """A decode warning, as Mesa's decode_error records it (isaspec_decode_impl.c: at most 4 per instruction, the rest
    dropped; numbers as BITSET_FORMAT "%08x%08x", 16 hex digits)."""
    if len(self.errors) < MAX_ERRORS: self.errors.append(text)

  # ---- decoding ----
  def find_bitset(self, root: str, val: int) -> Bitset:
    found = [b for b in self.leaves.get(root, ()) if b.matches(val, self.gpu_id)]
    if not found: raise DecodeError(f"no {root} matches {val:#x} on gpu {self.requested_gpu_id} (generation {self.gpu_id})")
    if len(found) > 1: raise DecodeError(f"bitset conflict for {val:#x}: {', '.join(b.name for b in found)}")
    b = found[0]
    if val & b.dontcare: self.error(f"dontcare bits in {b.name}: {val & b.dontcare:016x}")
    return b

  def evaluate(self, scope: _Scope, name: str) -> int:
    if name in scope.cache: return scope.cache[name]
    if name in self.stack[1:]: return 0     # a self-referring expression (as isaspec's push_expr refuses it)
    self.stack.append(name)
    try: v = self.exprs[name](lambda f: self.field_value(scope, f))
    finally: self.stack.pop()
    scope.cache[name] = v
    return v

  def find_field(self, scope: _Scope, bitset: Bitset, name: str):
    for case in bitset.cases:
      if case["expr"] is not None:
        current = self.stack[-1] if self.stack else None
        if current != case["expr"] and not self.evaluate(scope, case["expr"]): continue
      f = case["fields"].get(name)
      if f is not None: return f
    return self.find_field(scope, bitset.parent, name) if bitset.parent is not None else None

  def resolve(self, scope: _Scope | None, name: str):
    """(field, raw value) of name in scope (through <param>s to enclosing scopes), or (None, 0)."""
    if scope is None: return None, 0
    f = self.find_field(scope, scope.bitset, name)
    if f is None and scope.params:
      for pname, alias in scope.params:
        if alias == name: return self.resolve(scope.parent, pname)
    if f is None: return None, 0
    if f["expr"] is not None: return f, self.evaluate(scope, f["expr"]) & ((1 << 64) - 1)
    return f, (scope.val >> f["low"]) & ((1 << (f["high"] - f["low"] + 1)) - 1)

  def field_value(self, scope: _Scope, name: str) -> int:
    if name == GPU_ID: return self.gpu_id
    f, v = self.resolve(scope, name)
    if f is None:
      self.error(f"no field '{name}'")
      return 0
    return _sext(v, 64)   # expressions see int64_t

  def find_display(self, scope: _Scope, bitset: Bitset) -> str | None:
    for case in bitset.cases:
      if case["expr"] is not None and not self.evaluate(scope, case["expr"]): continue
      for f in case["fields"].values():
        if "assert" in f:
          got = (scope.val >> f["low"]) & ((1 << (f["high"] - f["low"] + 1)) - 1)
          if got != f["assert"]:
            self.error(f"WARNING: unexpected bits[{f['low']}:{f['high']}] in {bitset.name}: {got:016x} vs {f['assert']:016x}")
      if case["display"] is None: continue
      return case["display"]
    return self.find_display(scope, bitset.parent) if bitset.parent is not None else None

  def display(self, scope: _Scope, out: list[str]) -> None:
    template = self.find_display(scope, scope.bitset)
    if template is None:
      self.error(f"{scope.bitset.name}: no display template")
      return
    i = 0
    while i < len(template):
      c = template[i]
      if c == "{":
        j = template.index("}", i)
        self.display_field(scope, template[i + 1:j], out)
        i = j + 1
      else:
        out.append(c)
        i += 1

  def display_field(self, scope: _Scope, spec: str, out: list[str]) -> None:
    name, _, align = spec.partition(":align=")
    if align:
      col = len("".join(out).rsplit("\n", 1)[-1])
      out.append(" " * max(0, int(align) - col))
      if not name: return
    if name == "NAME":
      out.append(scope.bitset.name)
      return
    f, val = self.resolve(scope, name)
    if f is None:
      self.error(f"no field '{name}'")
      return
    width = 1 + f["high"] - f["low"]
    t = f["type"]
    if t in ("int", "branch", "absbranch"): out.append(str(_sext(val, width)))
    elif t == "uint": out.append(str(val))
    elif t == "hex": out.append(f"{val:x}")
    elif t == "offset":
      if val: out.append(f"{_sext(val, width):+d}")
    elif t == "uoffset":
      if val: out.append(f"+{val}")
    elif t == "float":
      out.append(_c_f(_half_to_float(val) if width == 16 else struct.unpack("<f", struct.pack("<I", val & 0xFFFFFFFF))[0]))
    elif t == "bool":
      if f["display"] is not None:
        if val: out.append(f["display"])
      else: out.append(str(val))
    elif t == "bool_inv":               # Mesa 25: a bool shown when clear (isaspec_decode_impl.c, TYPE_BOOL_INV)
      if f["display"] is not None:
        if not val: out.append(f["display"])
      else: out.append(str(int(not val)))
    elif t == "custom": pass            # printed by the user's field_print_cb, which ir3's disassembler does not set
    elif t in self.enums:
      out.append(self.enums[t].get(val, str(val)))
    elif t in self.bitsets:
      try: b = self.find_bitset(t, val)
      except DecodeError:
        self.error(f"no match: FIELD: '{scope.bitset.name}.{name}': {val:016x}")
        return
      self.display(_Scope(self, b, val, f["params"], scope), out)
    else:
      self.error(f"Bad field type: {t!r} ({name})")

  def decode(self, word: int, root: str = "#instruction", params=None, parent=None) -> "Decoded":
    """The instruction (leaf bitset) a word is and the value of every field that applies to it (fields of the cases
    whose expressions hold, and of the ancestors), derived fields included; a field typed by another bitset tree is
    itself a Decoded. Raises DecodeError when no instruction matches."""
    if parent is None: self.errors, self.stack = [], []
    b = self.find_bitset(root, word)
    scope = _Scope(self, b, word, params, parent)
    names: dict[str, None] = {}
    x = b
    while x is not None:
      for case in x.cases:
        if case["expr"] is not None and not self.evaluate(scope, case["expr"]): continue
        for n, f in case["fields"].items():
          if "assert" not in f: names.setdefault(n, None)
      x = x.parent
    values = {}
    for n in names:
      f, v = self.resolve(scope, n)
      if f is None: continue
      t = f["type"]
      if t in self.bitsets and f["expr"] is None:
        values[n] = self.decode(v, t, f["params"], scope)
      elif t in ("int", "branch", "offset"): values[n] = _sext(v, 1 + f["high"] - f["low"])
      else: values[n] = v
    return Decoded(b.name, word, values)

  @staticmethod
  def no_match_text(word: int, style: str = "plain") -> str:
    """The line Mesa prints for a word no instruction matches: "plain" is isaspec's own ("no match: %08x%08x" of
    the high and low words, compiler/isaspec/isaspec_decode_impl.c decode()); "raw" is ir3's no_match_cb print_raw
    (freedreno/ir3/ir3_shader.c: "raw 0x%X%X" of the low, then the high 32 bits, not zero-padded), which
    ir3_shader_disasm and ir3/tests/disasm.c use."""
    if style == "raw": return f"raw 0x{word & 0xFFFFFFFF:X}{word >> 32:X}"
    if style == "plain": return f"no match: {word:016x}"
    raise ValueError(f"no-match style {style!r}: expected 'plain' or 'raw'")

  def disasm_word(self, word: int, errors: bool = False) -> str:
    """One instruction word -> its text (Mesa's disassembler's line, without address or hex). With errors=True,
    decode warnings are appended after "\\t; " as Mesa's disassembler does; raises DecodeError on no match."""
    self.errors = []
    self.stack = []
    b = self.find_bitset("#instruction", word)
    out: list[str] = []
    self.display(_Scope(self, b, word, None, None), out)
    text = "".join(out)
    if errors and self.errors: text += "\t; " + ", ".join(self.errors)
    return text
