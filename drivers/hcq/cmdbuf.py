"""Command buffers built once and patched at submit.

A queue program's packets are a list of dwords where some words are not known when it is built: the address of a
buffer bound at submit, a timeline value, a kernarg address. Those words are `Patch`es: (key, shift, add) meaning
((values[key] + add) >> shift) & 0xFFFFFFFF. `Sym` is a symbolic 64-bit value the packet builders accept in place
of an int (sym + 8, lo(sym), hi(sym)).

Every vendor's packet builders take ints or Syms for addresses and values and split them with lo()/hi(); the engine
that lowered a queue program concatenates the words into a CommandBuffer (engine.py)."""
from __future__ import annotations

import dataclasses
from array import array


@dataclasses.dataclass(frozen=True)
class Patch:
  """A command-buffer word filled in at submit time: the value of key, shifted and offset."""
  key: object
  shift: int = 0
  add: int = 0

  def value(self, values) -> int: return ((values[self.key] + self.add) >> self.shift) & 0xFFFFFFFF


@dataclasses.dataclass(frozen=True)
class Sym:
  """A 64-bit value known at submit (values[key] + add)."""
  key: object
  add: int = 0

  def __add__(self, other: int) -> "Sym": return Sym(self.key, self.add + other)
  def lo(self) -> Patch: return Patch(self.key, 0, self.add)
  def hi(self) -> Patch: return Patch(self.key, 32, self.add)


def lo(x) -> int:
  """Low dword of a 64-bit value; a symbolic value (Sym) gives a patch."""
  return x & 0xFFFFFFFF if isinstance(x, int) else x.lo()


def hi(x) -> int:
  """High dword of a 64-bit value; a symbolic value (Sym) gives a patch."""
  return (x >> 32) & 0xFFFFFFFF if isinstance(x, int) else x.hi()


class CommandBuffer:
  """dwords with patch positions. fill(values) -> a new u32 array ready to write into a ring."""
  __slots__ = ("template", "patches", "engine", "_flat")

  def __init__(self, words: list, engine: str):
    self.engine = engine
    self.template = array("I", [w if isinstance(w, int) else 0 for w in words])
    self.patches = [(i, w) for i, w in enumerate(words) if not isinstance(w, int)]
    self._flatten()

  def _flatten(self) -> None:
    # fill() runs at every submit and reads no Patch attributes: (key, add, position, shift) tuples, where the low and
    # high dwords of one 64-bit value at consecutive positions (lo(sym), hi(sym): shifts 0 and 32) are one entry with
    # shift -1, so that the value is looked up and added once
    flat, patches = [], [(i, p.key, p.add, p.shift) for i, p in self.patches]
    k = 0
    while k < len(patches):
      i, key, add, shift = patches[k]
      if shift == 0 and k + 1 < len(patches) and patches[k + 1] == (i + 1, key, add, 32):
        flat.append((key, add, i, -1))
        k += 2
      else:
        flat.append((key, add, i, shift))
        k += 1
    self._flat = tuple(flat)

  def fill(self, values) -> array:
    out = self.template[:]       # a copy (array slicing: no per-item conversion)
    for key, add, i, shift in self._flat:
      v = values[key] + add
      if shift < 0:
        out[i] = v & 0xFFFFFFFF
        out[i + 1] = (v >> 32) & 0xFFFFFFFF
      else: out[i] = (v >> shift) & 0xFFFFFFFF
    return out

  def __len__(self): return len(self.template)


def link(cb: CommandBuffer, values) -> CommandBuffer:
  """A copy of cb with the patches whose keys are in values resolved for good (addresses known once the device
  exists: its signals, its event mailbox); the others stay for submit."""
  out = CommandBuffer.__new__(CommandBuffer)
  out.engine, out.template, out.patches = cb.engine, array("I", cb.template), []
  for i, p in cb.patches:
    if p.key in values: out.template[i] = p.value(values)
    else: out.patches.append((i, p))
  out._flatten()
  return out
