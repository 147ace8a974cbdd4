"""The process-wide translation cache (mockgpu/amd/emu/blockcache.py): a device opened after another one that ran the
same code at the same address uses the earlier translation (same source, same results), code rewritten in memory is
translated afresh, the cache stays within its bound, and threads with their own devices share it safely."""
import copy
import threading

import numpy as np
import pytest

from hcq.mockgpu.amd.emu import GPUMemory, blockcache, engine, native
from hcq.mockgpu.amd.emu.translate import target_bits, translate
from tests.fixtures.opencl import kernels

from .loader import HostBuffers, Kernel, run_corpus_kernel

# RDNA3 ISA "SOPP": s_nop (op 0) and s_endpgm (op 48), encoding 0b101111111 in [31:23] (the same on gfx12)
S_NOP = 0xBF800000
S_ENDPGM = 0xBFB00000


@pytest.fixture
def empty_cache():
  blockcache.clear()
  yield
  blockcache.clear()


def _second_device(bufs: HostBuffers) -> GPUMemory:
  """A fresh device memory that maps the same host ranges as bufs' (the code sits at the same addresses)."""
  mem = GPUMemory()
  for start, size in bufs.memory.ranges(): mem.add_range(start, size)
  return mem


def _code_object(k, mcpu):
  return k.code_object() if mcpu == "gfx1100" else k.code_object(mcpu)


@pytest.mark.parametrize("mcpu", ["gfx1100", "gfx1200", "gfx942"])
def test_cached_translation_is_the_fresh_one_for_every_corpus_kernel(empty_cache, mcpu):
  for name in sorted(kernels.KERNELS):
    k = kernels.KERNELS[name]
    bufs = HostBuffers(GPUMemory())
    prog = Kernel(bufs, _code_object(k, mcpu), k.name)
    run_corpus_kernel(bufs, prog, k, kernels)
    first = bufs.memory.block_cache
    assert first, name
    hits = blockcache.stats["hits"]
    bufs.memory = _second_device(bufs)       # the kernel's next launch runs on another device, same addresses
    run_corpus_kernel(bufs, prog, k, kernels, seed=1)   # results checked against the numpy reference
    second = bufs.memory.block_cache
    assert blockcache.stats["hits"] - hits >= len(first), f"{name}: the second device translated again"
    for (pc, mode), blk in second.items():
      fresh = translate(bufs.memory, pc, mode)
      assert (blk.source, blk.code, blk.start, blk.end, blk.insts) == \
             (fresh.source, fresh.code, fresh.start, fresh.end, fresh.insts), f"{name} block {pc:#x}"
      assert (blk.barrier, blk.ends, blk.trivial, blk.private, blk.sregs, blk.max_vgpr) == \
             (fresh.barrier, fresh.ends, fresh.trivial, fresh.private, fresh.sregs, fresh.max_vgpr)
      # the device's own copy: its own code-check state, and for a native block its own fault buffer
      assert blk is not first[(pc, mode)]
      if isinstance(blk.fn, native.NativeBlock):
        assert blk.fn is not first[(pc, mode)].fn and blk.fn.build is first[(pc, mode)].fn.build


def _code(bufs: HostBuffers, words) -> tuple[int, np.ndarray]:
  return bufs.array(np.array(words + [S_ENDPGM] * 4, np.uint32))


def test_code_rewritten_in_memory_is_translated_again_on_a_fresh_device(empty_cache):
  bufs = HostBuffers(GPUMemory())
  pc, code = _code(bufs, [S_NOP, S_NOP, S_ENDPGM])
  assert engine._block(bufs.memory, bufs.memory.block_cache, set(), pc, 0).insts == 3
  code[1] = S_ENDPGM                         # the block is now s_nop; s_endpgm
  mem = _second_device(bufs)
  misses = blockcache.stats["misses"]
  blk = engine._block(mem, mem.block_cache, set(), pc, 0)
  assert blk.insts == 2 and blk.code == code[:2].tobytes()
  assert blockcache.stats["misses"] == misses + 1
  # both versions stay cached (VARIANTS): a third device with either one's bytes gets it without translating
  code[1] = S_NOP
  mem = _second_device(bufs)
  hits = blockcache.stats["hits"]
  assert engine._block(mem, mem.block_cache, set(), pc, 0).insts == 3
  assert blockcache.stats["hits"] == hits + 1


def test_the_target_is_part_of_the_key(empty_cache):
  bufs = HostBuffers(GPUMemory())
  pc, _ = _code(bufs, [S_NOP, S_ENDPGM])
  a = engine._block(bufs.memory, bufs.memory.block_cache, set(), pc, target_bits("gfx1100"))
  b = engine._block(bufs.memory, bufs.memory.block_cache, set(), pc, target_bits("gfx1200"))
  assert blockcache.stats == {"hits": 0, "misses": 2}
  numpy_fn = lambda blk: getattr(blk.fn, "numpy_fn", blk.fn)   # under a NativeBlock where the block has one
  assert "gfx1200" in numpy_fn(b).__code__.co_filename and "gfx1100" in numpy_fn(a).__code__.co_filename


def test_the_cache_holds_at_most_its_bound(empty_cache, monkeypatch):
  monkeypatch.setattr(blockcache, "ENTRIES", 4)
  monkeypatch.setattr(blockcache, "VARIANTS", 2)
  bufs = HostBuffers(GPUMemory())
  pcs = [_code(bufs, [S_NOP] * i + [S_ENDPGM])[0] for i in range(8)]
  for pc in pcs: engine._block(bufs.memory, {}, set(), pc, 0)
  assert blockcache.size() == 4
  assert blockcache.lookup(bufs.memory, pcs[0], 0) is None          # the least recently used went first
  assert blockcache.lookup(bufs.memory, pcs[-1], 0) is not None
  pc, code = _code(bufs, [S_NOP, S_NOP, S_NOP, S_ENDPGM])
  for i in (3, 2, 1, 0):                     # four versions of the code at one address (4..1 instructions): two kept
    code[i] = S_ENDPGM
    assert engine._block(bufs.memory, {}, set(), pc, 0).insts == i + 1
  assert len(blockcache._table[(pc, 0, native.compiler())]) == 2
  assert len(blockcache._table) == 4 and blockcache.size() == 3 + 2   # three other keys of one version each


def test_threads_with_their_own_devices_share_the_cache(empty_cache):
  k = kernels.KERNELS["saxpy"]
  bufs = HostBuffers(GPUMemory())
  prog = Kernel(bufs, k.code_object(), k.name)
  run_corpus_kernel(bufs, prog, k, kernels)
  start = threading.Barrier(4)
  errors = []

  def run(seed):
    try:
      mine = HostBuffers(_second_device(bufs))   # the code image stays alive through bufs
      launch = copy.copy(prog)
      launch.bufs = mine                     # this thread's arguments go to its own device memory
      start.wait(timeout=10)
      for s in range(5):
        if s: mine.memory = _second_device(bufs)   # a fresh device each time
        run_corpus_kernel(mine, launch, k, kernels, seed=seed * 10 + s)
    except Exception as e:                  # reported by the main thread
      errors.append(e)

  threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
  for t in threads: t.start()
  for t in threads: t.join(timeout=60)
  assert not any(t.is_alive() for t in threads), "a thread did not finish within 60 s"
  assert not errors, errors
  assert blockcache.stats["hits"] >= 4 * 5

