"""UPat, PatternMatcher and graph_rewrite: the one mechanism every pass is written with.

  UPat(op, dtype, src, arg, name)   op: an Ops or a tuple of them (None: any); dtype likewise; arg: matched by ==
                                    when given; name: the capture name passed to the rule function.
    src=(a, b)     the sources match a and b in order (exact length unless allow_any_len)
    src=[a, b]     commutative: the sources match a and b in either order
    src=p          every source matches p (any number of them)
  PatternMatcher([(UPat, fn), ...])  fn(**captures) (plus ctx= when it takes ctx) returns a UOp or None (no match).
    Rules are indexed by op, and a rule whose source patterns name ops missing from the node's sources is rejected
    before any matching. Two PatternMatchers compose with +.
  graph_rewrite(root, pm, ctx, bottom_up=False)
    Rewrites the graph to a fixed point. By default the sources of a node are rewritten first, then the node
    (repeatedly, and whatever it becomes is rewritten in turn). With bottom_up=True the rules see a node before
    its sources. Traversal is iterative; a rewrite that never settles raises RewriteError naming the UOp.
"""
from __future__ import annotations

import inspect
import itertools
import types

from .dtypes import DType
from .ops import GroupOp, O, Ops
from .uop import CompileError, UOp, _short

_ANY = object()


class RewriteError(CompileError):
  """A rewrite that does not settle (a cycle, or more steps than the limit)."""


class UPat:
  __slots__ = ("op", "dtype", "src", "arg", "name", "allow_any_len", "early_reject", "_mode")

  def __init__(self, op=None, dtype=None, src=None, arg=_ANY, name: str | None = None, allow_any_len: bool = False):
    self.op = None if op is None else (op,) if isinstance(op, Ops) else tuple(op)
    self.dtype = None if dtype is None else (dtype,) if isinstance(dtype, DType) else tuple(dtype)
    self.arg, self.name, self.allow_any_len = arg, name, allow_any_len
    if src is None: self._mode, self.src = "any", None
    elif isinstance(src, UPat): self._mode, self.src = "all", src
    elif isinstance(src, list): self._mode, self.src = "perm", tuple(src)
    else: self._mode, self.src = "tuple", tuple(src)
    subs = () if self._mode in ("any", "all") else self.src
    self.early_reject = frozenset(p.op[0] for p in subs if p.op is not None and len(p.op) == 1)

  # constructors
  @staticmethod
  def var(name: str | None = None, dtype=None) -> "UPat": return UPat(dtype=dtype, name=name)
  @staticmethod
  def cvar(name: str | None = None, dtype=None) -> "UPat": return UPat(O.CONST, dtype=dtype, name=name)
  @staticmethod
  def const(value, name: str | None = None) -> "UPat": return UPat(O.CONST, arg=value, name=name)

  def named(self, name: str) -> "UPat":
    p = UPat.__new__(UPat)
    for k in UPat.__slots__: setattr(p, k, getattr(self, k))
    p.name = name
    return p

  def _bin(self, op: Ops, other, swap=False) -> "UPat":
    other = other if isinstance(other, UPat) else UPat.const(other)
    a, b = (other, self) if swap else (self, other)
    return UPat(op, src=[a, b] if op in GroupOp.Commutative else (a, b))
  def __add__(self, x): return self._bin(O.ADD, x)
  def __radd__(self, x): return self._bin(O.ADD, x, True)
  def __sub__(self, x): return self._bin(O.SUB, x)
  def __mul__(self, x): return self._bin(O.MUL, x)
  def __rmul__(self, x): return self._bin(O.MUL, x, True)
  def __floordiv__(self, x): return self._bin(O.FLOORDIV, x)
  def __mod__(self, x): return self._bin(O.FLOORMOD, x)
  def __and__(self, x): return self._bin(O.AND, x)
  def __or__(self, x): return self._bin(O.OR, x)
  def __xor__(self, x): return self._bin(O.XOR, x)
  def __lt__(self, x): return self._bin(O.CMPLT, x)
  def eq(self, x): return self._bin(O.CMPEQ, x)
  def ne(self, x): return self._bin(O.CMPNE, x)

  def __repr__(self):
    parts = [f"op={self.op}"] if self.op else []
    if self.name: parts.append(f"name={self.name!r}")
    if self.arg is not _ANY: parts.append(f"arg={self.arg!r}")
    if self.src is not None: parts.append(f"src={self.src!r}")
    return f"UPat({', '.join(parts)})"

  def match(self, u: UOp, store: dict) -> list[dict]:
    """Every way u matches; each a dict of captures (extending store)."""
    if self.op is not None and u.op not in self.op: return []
    if self.dtype is not None and u.dtype not in self.dtype: return []
    if self.arg is not _ANY and not (type(self.arg) is type(u.arg) and self.arg == u.arg): return []
    if self.name is not None:
      prev = store.get(self.name)
      if prev is not None and prev is not u: return []
      store = {**store, self.name: u}
    mode = self._mode
    if mode == "any": return [store]
    if mode == "all":
      stores = [store]
      for s in u.src: stores = [r for st in stores for r in self.src.match(s, st)]
      return stores
    pats = self.src
    if len(u.src) != len(pats) and not (self.allow_any_len and len(u.src) >= len(pats)): return []
    orders = itertools.permutations(pats) if mode == "perm" else (pats,)
    out = []
    for order in orders:
      stores = [store]
      for p, s in zip(order, u.src):
        stores = [r for st in stores for r in p.match(s, st)]
        if not stores: break
      out.extend(stores)
      if out and mode == "perm": break
    return out


_BY_NODE, _BY_CTX_NODE, _NO_ARGS = 1, 2, 3   # calling conventions of rules that need no matching (see __init__)


_NOT_PLAIN = inspect.CO_VARARGS | inspect.CO_VARKEYWORDS


def _parameters(fn) -> tuple[list[str] | None, bool]:
  """(the rule's parameter names when all of them can be passed by position, else None; whether one is named ctx).
  A plain function's are read from its code object (what inspect.signature reads too, at ~1/50 of the cost: the
  matchers of a process's first launch are built at import); any other callable goes through inspect.signature."""
  code = getattr(fn, "__code__", None)
  # (inspect.signature follows __wrapped__ to the function a decorator wraps, and honours __signature__)
  if type(fn) is types.FunctionType and code is not None and not ({"__wrapped__", "__signature__"} & fn.__dict__.keys()):
    names = list(code.co_varnames[:code.co_argcount + code.co_kwonlyargcount])
    var = code.co_flags & _NOT_PLAIN
    every = names + list(code.co_varnames[len(names):len(names) + bin(var).count("1")])
    return (None if var or code.co_kwonlyargcount else names), "ctx" in every
  params = inspect.signature(fn).parameters
  names = [p.name for p in params.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
  return (names if len(names) == len(params) else None), "ctx" in params


class PatternMatcher:
  def __init__(self, patterns: list, name: str | None = None):
    self.patterns = list(patterns)
    self.name = name
    self.pdict: dict[Ops, list] = {}
    for pat, fn in self.patterns:
      names, takes_ctx = _parameters(fn)
      # a pattern that only names the node (most rules: UPat(op, name="x")) needs no matching once the op is known:
      # its one capture is the node itself (the pdict lookup did the op test); called positionally where the
      # function's parameters allow it (no keyword dict per call)
      plain = pat._mode == "any" and pat.dtype is None and pat.arg is _ANY
      bare = pat.name if plain else None
      if names is None: pass
      elif bare is not None and names == [bare]: bare = _BY_NODE
      elif bare is not None and names == ["ctx", bare]: bare = _BY_CTX_NODE
      elif plain and pat.name is None and not names: bare = _NO_ARGS   # UPat(op) and a rule of no arguments
      for op in (pat.op if pat.op is not None else tuple(Ops)):
        self.pdict.setdefault(op, []).append((pat, fn, pat.early_reject, takes_ctx, bare))
    # an op whose one rule only names the node (fn(x) or fn(ctx, x)): graph_rewrite calls that function itself,
    # without rewrite()'s loop (same result: the rule's answer, None where it gives the node back)
    self.by_node = {op: r[0][1] for op, r in self.pdict.items() if len(r) == 1 and r[0][4] is _BY_NODE}
    self.by_ctx_node = {op: r[0][1] for op, r in self.pdict.items() if len(r) == 1 and r[0][4] is _BY_CTX_NODE}

  def __add__(self, other: "PatternMatcher") -> "PatternMatcher":
    return PatternMatcher(self.patterns + other.patterns, name=f"{self.name}+{other.name}")

  def rewrite(self, u: UOp, ctx=None):
    rules = self.pdict.get(u.op)
    if not rules: return None
    src_ops = None
    for pat, fn, early, takes_ctx, bare in rules:
      if bare is not None:
        if bare is _BY_NODE: ret = fn(u)
        elif bare is _BY_CTX_NODE: ret = fn(ctx, u)
        elif bare is _NO_ARGS: ret = fn()
        else: ret = fn(ctx=ctx, **{bare: u}) if takes_ctx else fn(**{bare: u})
        if ret is not None and ret is not u: return ret
        continue
      if early:
        if src_ops is None: src_ops = {s.op for s in u.src}
        if not early <= src_ops: continue
      for store in pat.match(u, {}):
        ret = fn(ctx=ctx, **store) if takes_ctx else fn(**store)
        if ret is not None and ret is not u: return ret
    return None


DEFAULT_STEP_LIMIT = 200_000


def graph_rewrite(root: UOp, pm: PatternMatcher, ctx=None, bottom_up: bool = False, name: str | None = None,
                  step_limit: int = DEFAULT_STEP_LIMIT) -> UOp:
  """Rewrite the graph under root with pm to a fixed point (see the module docstring)."""
  label = name or pm.name or "graph_rewrite"
  replace: dict[UOp, UOp] = {}
  waiting: set[UOp] = set()   # nodes whose result is being computed (their rewrite is on the stack)
  steps = 0
  stack: list = [(root, 0, None)]
  # the loop below runs once or more per node of every pass: its helpers are bound to locals
  push, pop, pm_rewrite = stack.append, stack.pop, pm.rewrite
  rule_ops = pm.pdict.keys()

  def bad(x: UOp, y):
    """The error for a rule's result y for x that is no UOp, or for one rewrite too many."""
    if not isinstance(y, UOp):
      return RewriteError(f"{label}: a rule returned {type(y).__name__}, not a UOp, for {_short(x)}", x)
    return RewriteError(f"{label}: no fixed point after {step_limit} rewrites; the last one rewrote {_short(x, 300)} "
                        f"into {_short(y, 300)}", x)

  if not bottom_up: return _rewrite_top_down(root, pm, ctx, label, step_limit, bad)
  while stack:
    n, stage, new = pop()
    if stage == 0:
      if n in replace: continue
      if n in waiting:
        raise RewriteError(f"{label}: the rewrite never settles: {_short(n, 300)} rewrites into a graph that "
                           f"contains it again", n)
      if bottom_up:
        y = pm_rewrite(n, ctx)
        if y is not None:
          steps += 1
          if steps > step_limit or not isinstance(y, UOp): raise bad(n, y)
          waiting.add(n)
          push((n, 2, y)); push((y, 0, None))
          continue
      waiting.add(n)
      depth = len(stack)
      push((n, 1, None))
      for s in reversed(n.src):
        if s not in replace:
          if s.src or s.op in rule_ops: push((s, 0, None))
          else: replace[s] = s   # a leaf no rule applies to (a literal, most often) is its own result
      if len(stack) > depth + 1: continue
      pop()   # every source is done already: on to stage 1 at once (what the next pop would have given)
    if stage <= 1:
      src = n.src
      x = n
      for s in src:
        if replace[s] is not s:
          x = UOp(n.op, tuple([replace[s] for s in src]), n.arg, n.tag)
          break
      if x is not n and bottom_up:
        if x in replace: replace[n] = replace[x]; waiting.discard(n); continue
        push((n, 2, x)); push((x, 0, None)); continue
      y = None if bottom_up else pm_rewrite(x, ctx)
      if y is None:
        replace[n] = x; replace[x] = x
        waiting.discard(n)
        continue
      steps += 1
      if steps > step_limit or not isinstance(y, UOp): raise bad(x, y)
      if y in replace:
        replace[n] = replace[y]; waiting.discard(n); continue
      push((n, 2, y)); push((y, 0, None))
    else:  # stage 2: n became new, whose result is now known
      replace[n] = replace[new]
      waiting.discard(n)
  return replace[root]


def _rewrite_top_down(root: UOp, pm: PatternMatcher, ctx, label: str, step_limit: int, bad) -> UOp:
  """graph_rewrite's loop without bottom_up (every pass but a few): the same steps in the same order, with the rule
  of an op that has one rule naming only the node called directly (PatternMatcher.by_node / by_ctx_node). The stack
  holds a node still to visit as itself, and (node, None) once its sources are pushed (its rewrite is next when they
  are done), or (node, y) when the node became y (its result is y's): no tuple is made for a visit."""
  replace: dict[UOp, UOp] = {}
  waiting: set[UOp] = set()   # nodes whose result is being computed (their rewrite is on the stack)
  steps = 0
  stack: list = [root]
  push, pop, pm_rewrite = stack.append, stack.pop, pm.rewrite
  rule_ops = pm.pdict.keys()
  by_node, by_ctx_node = pm.by_node, pm.by_ctx_node
  wait, done = waiting.add, waiting.discard
  replace_get = replace.__getitem__
  while stack:
    n = pop()
    if n.__class__ is UOp:   # a visit
      if n in replace: continue
      if n in waiting:
        raise RewriteError(f"{label}: the rewrite never settles: {_short(n, 300)} rewrites into a graph that "
                           f"contains it again", n)
      wait(n)
      pending = False
      for s in reversed(n.src):
        if s not in replace:
          if s.src or s.op in rule_ops:
            if not pending: push((n, None)); pending = True   # below every source it waits for
            push(s)
          else: replace[s] = s   # a leaf no rule applies to (a literal, most often) is its own result
      if pending: continue
      # every source is done already: on to its rewrite at once (what popping (n, None) would have given)
    else:
      n, new = n
      if new is not None:   # n became new, whose result is now known
        replace[n] = replace[new]
        done(n)
        continue
    src = n.src
    x = n
    for s in src:
      if replace[s] is not s:
        x = UOp(n.op, tuple(map(replace_get, src)), n.arg, n.tag)
        break
    op = x.op
    fn = by_node.get(op)
    if fn is not None: y = fn(x)
    elif op not in rule_ops: y = None
    else:
      fn = by_ctx_node.get(op)
      y = fn(ctx, x) if fn is not None else pm_rewrite(x, ctx)
    if y is None or y is x:
      replace[n] = x; replace[x] = x
      done(n)
      continue
    steps += 1
    if steps > step_limit or not isinstance(y, UOp): raise bad(x, y)
    if y in replace:
      replace[n] = replace[y]; done(n); continue
    push((n, y)); push(y)
  return replace[root]
