"""A third front end of the generator: Mesa's isaspec XML (src/freedreno/isa/ir3*.xml, the format documented in Mesa's
src/compiler/isaspec/README.rst) -> a python data module (autogen/qcom/ir3_isa.py) that hcq's ir3 decoder,
disassembler and assembler (compiler/isa/ir3) interpret.

The module holds, as plain data:
- BITSETS: name -> {"extends", "size" (roots only), "gen": (min, max), "match", "dontcare", "mask" (this bitset's own
  <pattern>s), "cases": [case, ...]} where the cases are the <override>s in document order, then the default case;
  "encode" holds the constant values the description's <encode> maps give fields (what Mesa's encoder writes into
  bits no display shows); a case is {"expr": name or None, "display": template or None, "fields": {name: field}}, a field {"low", "high",
  "type", "display", "params": [(name, as)], "expr" (derived fields), "assert" (asserted value, for <assert>)}.
  A name given by several bitsets for different generations (per-gen leaves) is a list of such dicts.
- ENUMS: name -> {value: display};  EXPRS: name -> C expression text (comments removed; {FIELD} references kept).
"""
from __future__ import annotations

import os
import pprint
import re
import xml.etree.ElementTree as ET


class IsaSpecError(Exception):
  pass


GEN_MAX = (1 << 32) - 1


def _int(text: str | None, where: str) -> int:
  try: return int(text, 0)
  except (TypeError, ValueError): raise IsaSpecError(f"{where}: {text!r} is not a number") from None


def _bits(e: ET.Element, where: str) -> tuple[int, int]:
  if e.get("pos") is not None: return _int(e.get("pos"), where), _int(e.get("pos"), where)
  if e.get("low") is None or e.get("high") is None: raise IsaSpecError(f"{where}: no pos or low/high")
  low, high = _int(e.get("low"), where), _int(e.get("high"), where)
  if not 0 <= low <= high < 64: raise IsaSpecError(f"{where}: bits {low}..{high} are not within a 64-bit word")
  return low, high


def _pattern(e: ET.Element, where: str) -> tuple[int, int, int]:
  """(match, dontcare, mask) of a <pattern>/<assert>: its text is one of 0/1/x per bit, high bit first."""
  low, high = _bits(e, where)
  text = (e.text or "").strip()
  if len(text) != high - low + 1: raise IsaSpecError(f"{where}: pattern {text!r} is not {high - low + 1} bits")
  match = dontcare = 0
  for ch in text:
    if ch not in "01x": raise IsaSpecError(f"{where}: bad pattern character {ch!r}")
    match, dontcare = (match << 1) | (ch == "1"), (dontcare << 1) | (ch == "x")
  return match << low, dontcare << low, ((1 << (high - low + 1)) - 1) << low


def _expr_text(text: str) -> str:
  return " ".join(re.sub(r"/\*.*?\*/", " ", text or "", flags=re.S).split())


class _Reader:
  def __init__(self, base: str):
    self.base = base
    self.bitsets: dict[str, list] = {}
    self.enums: dict[str, dict] = {}
    self.exprs: dict[str, str] = {}
    self.anon = 0
    self.seen: set[str] = set()

  def file(self, path: str) -> None:
    path = os.path.normpath(path)
    if path in self.seen: return        # imported twice (or a cycle): read once
    self.seen.add(path)
    try: root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as e: raise IsaSpecError(f"{path}: {e}") from None
    for imp in root.findall("import"):
      if not imp.get("file"): raise IsaSpecError(f"{path}: an <import> without a file")
      self.file(os.path.join(self.base, imp.get("file")))
    for e in root.findall("expr"): self.expr(e)
    for e in root.findall("enum"):
      self.enums[e.get("name")] = {_int(v.get("val"), f"{path}: enum {e.get('name')}"): v.get("display")
                                   for v in e.findall("value")}
    for b in root.findall("bitset"): self.bitset(b)

  def expr(self, e: ET.Element) -> str:
    name = e.get("name")
    if name is None:
      name = f"anon_{self.anon}"
      self.anon += 1
    self.exprs[name] = _expr_text(e.text)
    return name

  def one_expr(self, e: ET.Element, where: str) -> str:
    exprs = e.findall("expr")
    if len(exprs) != 1: raise IsaSpecError(f"{where}: expected one <expr>")
    return self.expr(exprs[0])

  def case(self, e: ET.Element, where: str, expr: str | None) -> dict:
    fields = {}
    for d in e.findall("derived"):
      high = _int(d.get("width"), where) - 1 if d.get("width") else 0   # the width sign-extends an int (low is 0)
      fields[d.get("name")] = {"low": 0, "high": high, "type": d.get("type"), "display": _display_attr(d),
                               "params": [], "expr": d.get("expr") or self.one_expr(d, f"{where}.{d.get('name')}")}
    for n, a in enumerate(e.findall("assert")):
      low, high = _bits(a, where)
      match, dontcare, _ = _pattern(a, where)
      if dontcare: raise IsaSpecError(f"{where}: 'x' is not valid in an <assert>")
      fields[f"#assert{n}"] = {"low": low, "high": high, "type": "uint", "display": None, "params": [], "expr": None,
                               "assert": match >> low}
    for f in e.findall("field"):
      low, high = _bits(f, f"{where}.{f.get('name')}")
      fields[f.get("name")] = {"low": low, "high": high, "type": f.get("type"), "display": _display_attr(f),
                               "params": [(p.get("name"), p.get("as", p.get("name"))) for p in f.findall("param")],
                               "expr": None}
    display = None
    for d in e.findall("display"): display = (d.text or "").strip()
    return {"expr": expr, "display": display, "fields": fields}

  def bitset(self, b: ET.Element) -> None:
    name = b.get("name")
    if not name: raise IsaSpecError("a <bitset> without a name")
    gen_min, gen_max = 0, GEN_MAX
    for g in b.findall("gen"):
      if g.get("min"): gen_min = _int(g.get("min"), name)
      if g.get("max"): gen_max = _int(g.get("max"), name)
    cases = [self.case(o, name, o.get("expr") or self.one_expr(o, name)) for o in b.findall("override")]
    cases.append(self.case(b, name, None))
    match = dontcare = mask = 0
    for p in b.findall("pattern"):
      m, d, k = _pattern(p, name)
      match, dontcare, mask = match | m, dontcare | d, mask | k
    # <encode><map name=F>N</map>: the value the encoder gives field F when it is a constant (force: always)
    encode = {}
    for e in b.findall("encode"):
      for m in e.findall("map"):
        text = (m.text or "").strip()
        if re.fullmatch(r"0x[0-9a-fA-F]+|\d+", text): encode[m.get("name")] = (int(text, 0), m.get("force") == "true")
    self.bitsets.setdefault(name, []).append(
      {"name": name, "extends": b.get("extends"), "size": _int(b.get("size"), name) if b.get("size") else None,
       "gen": (gen_min, gen_max), "match": match, "dontcare": dontcare, "mask": mask, "cases": cases,
       "encode": encode})


def _display_attr(e: ET.Element):
  d = e.get("display")
  return d.strip() if d is not None else None


def read(xml_path: str) -> dict:
  r = _Reader(os.path.dirname(xml_path))
  r.file(xml_path)
  bitsets = {k: (v[0] if len(v) == 1 else v) for k, v in r.bitsets.items()}
  return {"BITSETS": bitsets, "ENUMS": r.enums, "EXPRS": r.exprs}


def module_text(modname: str, xml_path: str, source: str) -> str:
  data = read(xml_path)
  out = [f'"""Generated by `python -m hcq.autogen {modname}` from {source} (isaspec). Do not edit.\n\n'
         "The instruction set as data (autogen/isaspec.py says what each table holds); compiler/isa/ir3 decodes,\n"
         'prints and assembles with it."""\n']
  for key in ("ENUMS", "EXPRS", "BITSETS"):
    out.append(f"{key} = {pprint.pformat(data[key], width=120, sort_dicts=False)}\n")
  return "\n".join(out)
