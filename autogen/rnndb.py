"""A second front end of the generator: rnndb register databases (the "rules-ng-ng" XML Mesa's freedreno keeps its
Adreno registers and CP packets in: src/freedreno/registers/**.xml, format described in rules-fd.txt there, Mesa 25).

    db = load(registers_dir, "adreno/a6xx.xml")   # that file's own items; imports only resolve types
    db.registers, db.fields, db.enums              # what the module writes (below)

What one file gives, named as Mesa's C headers of that file name them (so that the test can hold every value equal
to what gcc reads from the header Mesa's gen_header.py writes of the same file):
- registers: full name (REG_ + [variant prefix] + domain name unless bare + array names + register name) ->
  (offset, strides): strides is () for a plain register, (stride,) for a register in an <array> (or one with a
  length): its offset for index i is offset + stride * i.
- fields: full register name without REG_ + "_" + bitfield name -> (low, high, shr, boolean). A boolean field (type
  boolean, or one bit wide with no type) is a flag: its value is the mask. A register's own low/high attributes
  describe its value, not a field (no field).
- enums: enum name -> [(value name, value)] in document order, C's numbering for values without one.
The variant prefix follows Mesa 25's gen_header.py (Parser.prefix, parse_variants): in a domain with a prefix
attribute, an item is named after the stripe's first variant, else the domain's; in a prefix="variant" domain an item
(register or array) that has variants of its own (a register in an array: the array's) is named after its first
variant alone: a6xx.xml's REG_A7XX_SP_CS_CNTL_1 next to REG_A6XX_SP_CS_CNTL_1.
"""
from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

NS = "{http://nouveau.freedesktop.org/}"


class RnnError(Exception):
  pass


@dataclass
class Database:
  path: str
  registers: dict = field(default_factory=dict)     # name -> (offset, strides)
  fields: dict = field(default_factory=dict)        # name -> (low, high, shr, boolean, kind, radix)
  enums: dict = field(default_factory=dict)         # enum name -> [(name, value)]


def _tag(e) -> str: return e.tag[len(NS):] if e.tag.startswith(NS) else e.tag


def _int(s: str, where: str) -> int:
  try: return int(s, 0)
  except (TypeError, ValueError): raise RnnError(f"{where}: {s!r} is not a number") from None


class _Types:
  """Every <enum> and <bitset> of a file and the files it imports, by name (the types registers refer to)."""

  def __init__(self, root_dir: str):
    self.root_dir = root_dir
    self.enums: dict[str, ET.Element] = {}
    self.bitsets: dict[str, ET.Element] = {}
    self.loaded: set[str] = set()

  def load(self, rel: str | None) -> ET.Element | None:
    """Parse rel (relative to the database folder) once; its types are recorded. Returns its root the first time."""
    if not rel: raise RnnError(f"{self.root_dir}: an <import> without a file")
    if rel in self.loaded: return None
    self.loaded.add(rel)
    path = os.path.join(self.root_dir, rel)
    try: root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as e: raise RnnError(f"{path}: {e}") from None
    for e in root.iter():
      t = _tag(e)
      if t == "import": self.load(e.get("file"))
      elif t == "enum" and e.get("name"): self.enums.setdefault(e.get("name"), e)
      elif t == "bitset" and e.get("name"): self.bitsets.setdefault(e.get("name"), e)
    return root


class _Walker:
  """Walks one file's own <enum>s, non-inline <bitset>s and <domain>s, naming items as Mesa's header does."""

  def __init__(self, types: _Types, db: Database):
    self.types, self.db = types, db

  def enum(self, e: ET.Element) -> None:
    name = e.get("name")
    if name in self.db.enums: return
    values = []
    for v in e:
      if _tag(v) != "value": continue
      # a value without a number (the names of a variant set, e.g. enum chip) is 0 in the header
      val = _int(v.get("value"), f"enum {name} value {v.get('name')}") if v.get("value") is not None else 0
      values.append((v.get("name"), val))
    self.db.enums[name] = values

  def bitset(self, b: ET.Element) -> None:
    """A non-inline bitset has fields of its own, named after it (registers of its type get none)."""
    if b.get("inline") == "yes": return
    for f in b:
      if _tag(f) == "bitfield": self.bitfield(f, b.get("name"))

  def domain(self, d: ET.Element) -> None:
    # Mesa 25's gen_header.py (start_element "domain"): a domain with a prefix attribute names its items after the
    # first of its own variants (none: the domain name alone); prefix="variant" names an item that has variants
    # after its variant alone (REG_A7XX_SP_CS_CNTL_1 in domain A6XX)
    prefix = _first_variant(d.get("variants")) if d.get("prefix") else None
    self.children(d, {"domain": d.get("name"), "prefix": prefix, "prefix_type": d.get("prefix"), "stripe": None,
                      "array": None})

  def children(self, parent: ET.Element, ctx: dict) -> None:
    for e in parent:
      t = _tag(e)
      if t in ("reg32", "reg64"): self.register(e, ctx, 64 if t == "reg64" else 32)
      elif t == "array": self.array(e, ctx)
      elif t == "stripe": self.children(e, {**ctx, "stripe": _first_variant(e.get("variants"))})
      elif t == "enum": self.enum(e)
      elif t == "bitset": self.bitset(e)

  def scope(self, ctx: dict, variant: str | None = None) -> str:
    """The name an item starts with (gen_header.py prefix()): its variant alone in a prefix="variant" domain, else
    the stripe's variant (else the domain's prefix) + the domain."""
    if ctx.get("prefix_type") == "variant" and variant: return variant
    v = ctx["stripe"] or ctx["prefix"]
    return f"{v}_{ctx['domain']}" if v else ctx["domain"]

  def array(self, e: ET.Element, ctx: dict) -> None:
    where = f"<array {e.get('name')}>"
    if ctx["array"]: raise RnnError(f"{where}: an array inside an array (not modelled)")
    if e.get("offsets") or e.get("doffsets"): raise RnnError(f"{where}: an array of listed offsets (not modelled)")
    variant = _first_variant(e.get("variants"))
    local = e.get("name", "")
    name = f"{self.scope(ctx, variant)}_{local}"
    offset, stride = _int(e.get("offset"), where), _int(e.get("stride"), where)
    self.db.registers["REG_" + name] = (offset, (stride,))
    self.children(e, {**ctx, "array": (local, offset, stride, variant)})

  def register(self, e: ET.Element, ctx: dict, bits: int = 32) -> None:
    where = f"register {e.get('name')}"
    if not e.get("name"): raise RnnError(f"{where} at offset {e.get('offset')}: a register without a name")
    offset = _int(e.get("offset"), where)
    variant = _first_variant(e.get("variants"))
    if ctx["array"]:
      aname, aoff, astride, avariant = ctx["array"]
      name = f"{self.scope(ctx, variant or avariant)}_{aname}_{e.get('name').strip()}"
      self.db.registers["REG_" + name] = (aoff + offset, (astride,))
    else:
      name = f"{self.scope(ctx, variant)}_{e.get('name').strip()}"   # (a4xx.xml has a name with a trailing blank)
      self.db.registers["REG_" + name] = (offset, ())
    t = e.get("type")
    bitset = self.types.bitsets.get(t) if t else None
    # an inline bitset's fields become the register's (a non-inline one keeps its own, written with the bitset),
    # and so do the register's own bitfields; a register typed with no bitset describes its whole value
    if bitset is not None and bitset.get("inline") == "yes":
      for f in bitset:
        if _tag(f) == "bitfield": self.bitfield(f, name)
    for f in e:
      if _tag(f) == "bitfield": self.bitfield(f, name)
      elif _tag(f) == "enum": self.enum(f)     # an enum declared inside a register is the file's (gen_header.py)
    if t is not None and bitset is None: self.bitfield(e, name, own=True, bits=bits)

  def bitfield(self, f: ET.Element, prefix: str, own: bool = False, bits: int = 32) -> None:
    where = f"bitfield {prefix}_{f.get('name')}"
    if not own and not f.get("name"): raise RnnError(f"{where}: a bitfield without a name")
    if f.get("pos") is not None: low = high = _int(f.get("pos"), where)
    elif f.get("low") is not None and f.get("high") is not None: low, high = _int(f.get("low"), where), _int(f.get("high"), where)
    else: low, high = 0, bits - 1     # the whole register (gen_header.py parse_field: current_bitsize - 1)
    t, shr = f.get("type"), _int(f.get("shr", "0"), where)
    name = prefix if own else f"{prefix}_{f.get('name').strip()}"
    # a register's own untyped-looking value (starting at bit 0, not shifted, not a float/fixed) gets no macros
    if own and low == 0 and shr == 0 and t not in ("float", "fixed", "ufixed"): return
    flag = t == "boolean" or (t is None and low == high)
    # how a value is put into the field, as the header's X(val) does: float (the bits of an f32, or an f16 for a
    # 16-bit field), fixed/ufixed (times 2^radix, truncated), int (two's complement, masked), else the number as is
    kind = t if t in ("float", "fixed", "ufixed", "int") else "uint"
    radix = _int(f.get("radix", "0"), where) if kind in ("fixed", "ufixed") else 0
    self.db.fields[name] = (low, high, shr, flag, kind, radix)


def _first_variant(spec: str | None) -> str | None:
  """The variant an item is named after: the first of its variants list, without a range's end ("A5XX-" -> A5XX)."""
  if not spec: return None
  return spec.split(",")[0].split("-")[0] or None


def load(registers_dir: str, rel: str) -> Database:
  """The items of registers_dir/rel (its imports only give the types it refers to)."""
  types = _Types(registers_dir)
  root = types.load(rel)
  db = Database(rel)
  w = _Walker(types, db)
  for e in root:
    t = _tag(e)
    if t == "enum": w.enum(e)
    elif t == "bitset": w.bitset(e)
    elif t == "domain": w.domain(e)
  return db


# ---- the generated module ----
# A module holds its items as one data block, parsed at import by runtime_rnn.install (thousands of assignments would
# cost more to compile than the block costs to parse): "R name offset" a register, "A name offset stride" a register
# of an array (a function of the index), "F name low high shr flag [kind radix]" a field, "E enum name value" an enum value.

def module_text(modname: str, db: Database, source: str) -> str:
  lines = []
  for name, (offset, strides) in db.registers.items():
    lines.append(f"R {name} {offset:#x}" if not strides else f"A {name} {offset:#x} {strides[0]:#x}")
  for name, (low, high, shr, flag, kind, radix) in db.fields.items():
    lines.append(f"F {name} {low} {high} {shr} {int(flag)}" + (f" {kind} {radix}" if kind != "uint" else ""))
  for enum, values in db.enums.items():
    for name, value in values: lines.append(f"E {enum} {name} {value:#x}" if value >= 0 else f"E {enum} {name} {value}")
  return (f'"""Generated by `python -m hcq.autogen {modname}` from {source} (rnndb). Do not edit.\n\n'
          "Names as Mesa's gen_header.py writes them in C: REG_X = offset (REG_X(i) for array registers),\n"
          "X__MASK / X__SHIFT and X(value) for fields (a one-bit flag X is its mask), enum values by name;\n"
          'REGISTERS, FIELDS and ENUMS hold them as data (hcq/autogen/runtime_rnn.py)."""\n'
          "from hcq.autogen.runtime_rnn import install\n\n"
          f"_DATA = \"\"\"\n" + "\n".join(lines) + "\n\"\"\"\n\n"
          "REGISTERS, FIELDS, ENUMS = install(globals(), _DATA)\n")


def generate(modname: str, registers_dir: str, rel: str, source: str) -> str:
  return module_text(modname, load(registers_dir, rel), source)
