"""The process-wide cache of translated blocks, shared by every device (GPUMemory) of the process.

A translation (decode, Python source generation, compile(), and the native C block's build, native.NativeBlock) is a
function of the block's code bytes, its start address (branch targets and s_getpc are emitted as constants, and the
source names the address), the translation key `mode` (denormal bits and target bits: arch, wave size; see
translate.target_bits) and whether a C compiler is there (native.attach). This cache is keyed by all of them, so a
device opened after another one that ran the same kernel at the same address does not translate it again. The
bytes are compared with the memory before a cached translation is used, so code rewritten in memory is translated
afresh.

What stays per device: the engine's own block cache (GPUMemory.block_cache) holds a copy of the cached Block with its
own mapping state (code_view, mapped_generation) and, for a native block, its own NativeBlock (fault buffer, call
count) sharing the built function.

Bounded: at most ENTRIES (address, mode) keys, least recently used dropped first, each with at most VARIANTS code
versions. Thread-safe: one lock around the table (a translation itself runs outside it; two threads translating the
same block at once both translate, and the first one stored wins).
"""
from __future__ import annotations

import copy
import threading
from collections import OrderedDict

from . import native

ENTRIES = 2048     # (pc, mode) keys kept: tests/emu, amd, runtime and mockgpu translate ~2,500 blocks in all, mostly
                   # one-off fuzz kernels; a block (source ~4 KB, code object, native source) takes ~10-20 KB
VARIANTS = 2       # code versions kept per key (code rewritten in place at one address)

_lock = threading.Lock()
_table: OrderedDict = OrderedDict()    # (pc, mode, compiler) -> [Block, ...] (templates: never run themselves)
stats = {"hits": 0, "misses": 0}       # process-wide, for tests and bench/


def _code_at(memory, pc: int, end: int) -> bytes | None:
  """The bytes [pc, end) when one mapped range holds them, else None."""
  rng = memory.range_of(pc)
  if rng is None or rng[1] < end: return None
  return bytes(memory.u8[pc - memory.VIEW_BASE:end - memory.VIEW_BASE])


def _for_device(tmpl):
  """A copy of a template Block for one device: its own code-check state, its own NativeBlock wrapper."""
  blk = copy.copy(tmpl)
  blk.code_view, blk.mapped_generation = None, -1
  if isinstance(tmpl.fn, native.NativeBlock): blk.fn = tmpl.fn.sharing_build()
  return blk


def lookup(memory, pc: int, mode: int):
  """A per-device copy of the cached translation of the block at pc whose bytes are in memory now, or None."""
  key = (pc, mode, native.compiler())
  with _lock:
    variants = _table.get(key)
    if variants is None:
      stats["misses"] += 1
      return None
    _table.move_to_end(key)
    variants = list(variants)
  for tmpl in variants:
    if _code_at(memory, pc, tmpl.end) == tmpl.code:
      with _lock: stats["hits"] += 1
      return _for_device(tmpl)
  with _lock: stats["misses"] += 1
  return None


def store(pc: int, mode: int, blk):
  """Keep a fresh translation (as the template) and return the device's copy of it."""
  key = (pc, mode, native.compiler())
  with _lock:
    variants = _table.get(key)
    if variants is None:
      if len(_table) >= ENTRIES: _table.popitem(last=False)
      variants = _table[key] = []
    else:
      _table.move_to_end(key)
    same = [t for t in variants if t.code == blk.code]
    if same: tmpl = same[0]          # another thread stored the same translation meanwhile
    else:
      if len(variants) >= VARIANTS: del variants[0]
      variants.append(blk)
      tmpl = blk
  return _for_device(tmpl)


def size() -> int:
  """Blocks held (all keys, all variants)."""
  with _lock: return sum(len(v) for v in _table.values())


def clear() -> None:
  with _lock:
    _table.clear()
    stats.update(hits=0, misses=0)
