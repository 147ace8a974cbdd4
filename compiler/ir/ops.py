"""The operations of the UOp IR, grouped by role."""
from __future__ import annotations

import enum


class Ops(enum.Enum):
  # graph structure
  SINK = enum.auto(); GROUP = enum.auto(); LINEAR = enum.auto(); NOOP = enum.auto()
  # leaves
  CONST = enum.auto(); PARAM = enum.auto(); BUFFER = enum.auto(); SPECIAL = enum.auto(); DEFINE_VAR = enum.auto()
  # loops and ordering
  RANGE = enum.auto(); END = enum.auto(); REDUCE = enum.auto(); AFTER = enum.auto(); BARRIER = enum.auto()
  IF = enum.auto(); ENDIF = enum.auto()
  # memory
  INDEX = enum.auto(); LOAD = enum.auto(); STORE = enum.auto()
  # type changes
  CAST = enum.auto(); BITCAST = enum.auto()
  # unary
  NEG = enum.auto(); NOT = enum.auto(); SQRT = enum.auto(); EXP2 = enum.auto(); LOG2 = enum.auto(); SIN = enum.auto()
  RECIP = enum.auto(); TRUNC = enum.auto()
  # binary. FLOORDIV/FLOORMOD have Python's floor semantics on ints; IDIV/IMOD are C's truncating forms.
  ADD = enum.auto(); SUB = enum.auto(); MUL = enum.auto(); FDIV = enum.auto(); FLOORDIV = enum.auto()
  FLOORMOD = enum.auto(); IDIV = enum.auto(); IMOD = enum.auto(); MAX = enum.auto(); AND = enum.auto()
  OR = enum.auto(); XOR = enum.auto(); SHL = enum.auto(); SHR = enum.auto()
  CMPLT = enum.auto(); CMPEQ = enum.auto(); CMPNE = enum.auto()
  # ternary
  WHERE = enum.auto(); MULACC = enum.auto()
  # calls (no FUNCTION op: a CALL whose body is a TUPLE produces values, read with GETTUPLE)
  CALL = enum.auto(); TUPLE = enum.auto(); GETTUPLE = enum.auto(); PROGRAM = enum.auto(); COPY = enum.auto()

  # Enum's __hash__ is Python code (hash of the name), called hundreds of thousands of times per large kernel (rule
  # tables, op sets, UOp cache keys); members compare by identity, so the C identity hash is equivalent and faster.
  __hash__ = object.__hash__
  # target instructions and escape hatches: INS arg (op, dtype), CUSTOM arg (fmt, dtype)
  INS = enum.auto(); CUSTOM = enum.auto()

  def __repr__(self): return f"Ops.{self.name}"


class GroupOp:
  Unary = frozenset({Ops.NEG, Ops.NOT, Ops.SQRT, Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.RECIP, Ops.TRUNC})
  Binary = frozenset({Ops.ADD, Ops.SUB, Ops.MUL, Ops.FDIV, Ops.FLOORDIV, Ops.FLOORMOD, Ops.IDIV, Ops.IMOD, Ops.MAX,
                      Ops.AND, Ops.OR, Ops.XOR, Ops.SHL, Ops.SHR, Ops.CMPLT, Ops.CMPEQ, Ops.CMPNE})
  Ternary = frozenset({Ops.WHERE, Ops.MULACC})
  ALU = Unary | Binary | Ternary
  Comparison = frozenset({Ops.CMPLT, Ops.CMPEQ, Ops.CMPNE})
  Commutative = frozenset({Ops.ADD, Ops.MUL, Ops.MAX, Ops.AND, Ops.OR, Ops.XOR, Ops.CMPEQ, Ops.CMPNE})
  IntOnly = frozenset({Ops.FLOORDIV, Ops.FLOORMOD, Ops.IDIV, Ops.IMOD, Ops.SHL, Ops.SHR})
  FloatOnly = frozenset({Ops.FDIV, Ops.SQRT, Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.RECIP, Ops.TRUNC})
  Memory = frozenset({Ops.PARAM, Ops.BUFFER})


class O:
  """Ops' members as plain class attributes, for code that runs per node: `Ops.ADD` goes through EnumType.__getattr__'s
  lookup hook on Python 3.11 (about ten times a plain class attribute's cost: CPython's Lib/enum.py, EnumType
  defines __getattr__ there), `O.ADD` is the same member found directly."""


for _member in Ops: setattr(O, _member.name, _member)
del _member
