"""repr(uop): a Python expression that rebuilds the graph; nodes used more than once are named once with a walrus
(`UOp(Ops.ADD, arg=None, src=(x0:=UOp(Ops.CONST, arg=42, src=()), x0,))`); eval_repr(repr(u)) is u."""
from __future__ import annotations

import math

from .args import AxisType, BufferArg, Invalid, KernelInfo, VarArg
from .dtypes import AddrSpace, DType, PtrDType, dtypes
from .ops import Ops

def render_repr(root) -> str:
  users: dict = {}
  for u in root.toposort():
    for s in u.src: users[s] = users.get(s, 0) + 1
  names: dict = {}
  out: list[str] = []
  stack: list = [root]
  while stack:
    item = stack.pop()
    if isinstance(item, str): out.append(item); continue
    u = item
    if u in names: out.append(names[u]); continue
    if users.get(u, 0) > 1:
      names[u] = f"x{len(names)}"
      out.append(f"{names[u]}:=")
    head = f"UOp({u.op!r}, arg={u.arg!r}" + (f", tag={u.tag!r}" if u.tag is not None else "") + ", src=("
    out.append(head)
    stack.append("))")
    for i in reversed(range(len(u.src))):
      stack.append("," if i == len(u.src) - 1 else ", ")
      stack.append(u.src[i])
  return "".join(out)


def repr_namespace(uop_class) -> dict:
  """The names an eval() of repr(uop) needs; uop_class is uop.UOp (given by uop.py, which imports this module: this
  one does not import it back)."""
  return {"UOp": uop_class, "Ops": Ops, "dtypes": dtypes, "DType": DType, "PtrDType": PtrDType, "AddrSpace": AddrSpace,
          "BufferArg": BufferArg, "Invalid": Invalid, "VarArg": VarArg, "KernelInfo": KernelInfo, "AxisType": AxisType,
          "inf": math.inf, "nan": math.nan}


def eval_repr(text: str, uop_class):
  return eval(text, repr_namespace(uop_class))  # noqa: S307 - the text is a UOp repr
