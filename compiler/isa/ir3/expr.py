"""The C expressions of an isaspec description (<expr>: field references {NAME}, integer literals, the C operators),
compiled once into python closures.

    f = compile_expr("({SRC1_R} != 0) && ({REPEAT} == 0)")
    f(lookup)      # lookup(name) -> the field's value; returns the expression's value as C computes it

Field values are signed 64-bit in these expressions (isaspec declares each referenced field as an int64_t local);
comparisons and logical operators give 0 or 1; / and % truncate toward zero as C's do. ISA_GPU_ID() (Mesa 25) asks
the lookup for GPU_ID.
"""
from __future__ import annotations

import re

_TOKEN = re.compile(r"\s*(?:(\{[A-Za-z0-9_]+\}|ISA_GPU_ID\(\s*\))|(0[xX][0-9a-fA-F]+|\d+)[uUlL]*|(<<|>>|<=|>=|==|!=|&&|\|\||[-+*/%<>&|^!~?:()]))")


# ISA_GPU_ID(): the gpu id the decoder (or encoder) is for (Mesa 25's src/compiler/isaspec/decode.py defines it as
# the decode options' gpu_id): the lookup is asked for this name, which no field can have
GPU_ID = "#gpu_id"


class ExprError(Exception):
  pass


def _wrap64(v: int) -> int:
  v &= (1 << 64) - 1
  return v - (1 << 64) if v >> 63 else v


def _div(a: int, b: int) -> int:
  if b == 0: raise ExprError("division by zero")
  q = abs(a) // abs(b)
  return q if (a < 0) == (b < 0) else -q


_BINARY = {
  "*": (10, lambda a, b: a * b), "/": (10, _div), "%": (10, lambda a, b: a - _div(a, b) * b),
  "+": (9, lambda a, b: a + b), "-": (9, lambda a, b: a - b),
  "<<": (8, lambda a, b: a << b), ">>": (8, lambda a, b: a >> b),
  "<": (7, lambda a, b: int(a < b)), "<=": (7, lambda a, b: int(a <= b)), ">": (7, lambda a, b: int(a > b)),
  ">=": (7, lambda a, b: int(a >= b)), "==": (6, lambda a, b: int(a == b)), "!=": (6, lambda a, b: int(a != b)),
  "&": (5, lambda a, b: a & b), "^": (4, lambda a, b: a ^ b), "|": (3, lambda a, b: a | b),
}


class _Parser:
  def __init__(self, text: str):
    self.text = text
    self.toks: list[tuple[str, object]] = []
    pos = 0
    while pos < len(text):
      m = _TOKEN.match(text, pos)
      if not m or m.end() == pos:
        if text[pos:].strip() == "": break
        raise ExprError(f"cannot read {text[pos:]!r} in {text!r}")
      field, num, op = m.groups()
      if field and field.startswith("ISA_GPU_ID"): self.toks.append(("field", GPU_ID))
      elif field: self.toks.append(("field", field[1:-1]))
      elif num: self.toks.append(("num", int(num, 0)))
      else: self.toks.append(("op", op))
      pos = m.end()
    self.i = 0

  def peek(self):
    return self.toks[self.i] if self.i < len(self.toks) else ("end", None)

  def take(self, op: str | None = None):
    t = self.peek()
    if op is not None and t != ("op", op): raise ExprError(f"expected {op!r} in {self.text!r}, found {t[1]!r}")
    self.i += 1
    return t

  def parse(self):
    e = self.ternary()
    if self.peek()[0] != "end": raise ExprError(f"unexpected {self.peek()[1]!r} in {self.text!r}")
    return e

  def ternary(self):
    c = self.logical_or()
    if self.peek() == ("op", "?"):
      self.take()
      a = self.ternary()
      self.take(":")
      b = self.ternary()
      return lambda f: a(f) if c(f) else b(f)
    return c

  def logical_or(self):
    a = self.logical_and()
    while self.peek() == ("op", "||"):
      self.take()
      b, x = self.logical_and(), a
      a = lambda f, x=x, b=b: int(bool(x(f)) or bool(b(f)))
    return a

  def logical_and(self):
    a = self.binary(3)
    while self.peek() == ("op", "&&"):
      self.take()
      b, x = self.binary(3), a
      a = lambda f, x=x, b=b: int(bool(x(f)) and bool(b(f)))
    return a

  def binary(self, min_prec: int):
    a = self.unary()
    while True:
      kind, op = self.peek()
      if kind != "op" or op not in _BINARY or _BINARY[op][0] < min_prec: return a
      prec, fn = _BINARY[op]
      self.take()
      b = self.binary(prec + 1)
      a = lambda f, x=a, b=b, fn=fn: _wrap64(fn(x(f), b(f)))

  def unary(self):
    kind, v = self.peek()
    if kind == "op" and v in ("!", "~", "-", "+"):
      self.take()
      a = self.unary()
      return {"!": lambda f: int(not a(f)), "~": lambda f: _wrap64(~a(f)), "-": lambda f: _wrap64(-a(f)),
              "+": a}[v]
    if kind == "op" and v == "(":
      self.take()
      e = self.ternary()
      self.take(")")
      return e
    self.take()
    if kind == "num": return lambda f, v=v: v
    if kind == "field": return lambda f, v=v: f(v)
    raise ExprError(f"unexpected {v!r} in {self.text!r}")


def compile_expr(text: str):
  return _Parser(text).parse()
