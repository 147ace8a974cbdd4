"""The interpreter's schedule of diverged threads (mockgpu/nv/ptx/cfg.py: a weak topological order of the CFG), its
translation cache, and the corpus kernels at the sizes a user launches (tests/nv/ptx/corpus_scale.py) against numpy,
in one batch and split over many."""
from __future__ import annotations

import numpy as np
import pytest

from hcq.mockgpu.nv.ptx import executor, parse, run
from hcq.mockgpu.nv.ptx.cfg import weak_topological_order
from corpus_scale import scaled, threads_of
from ptx_launch import HostMemory, pack_params, run_corpus_kernel
from tests.fixtures.cuda.kernels import KERNELS


def _rank(order): return {v: i for i, v in enumerate(order)}


def test_weak_topological_order_keeps_loops_whole_and_exits_after_them():
  # 0 -> 1 (outer head) -> 2 (inner head) <-> 3, 2 -> 4 (inner exit) -> 1 (outer back edge), 1 -> 5 (exit);
  # the successors of 1 and 2 list the exit first, which a plain reverse postorder would rank before the loop body
  succ = {0: (1,), 1: (5, 2), 2: (4, 3), 3: (2,), 4: (1,), 5: ()}
  r = _rank(weak_topological_order(0, succ))
  assert sorted(r) == [0, 1, 2, 3, 4, 5]
  assert r[0] < r[1] < r[2] < r[3] < r[4] < r[5]
  # a loop whose latch is laid out before its head (clang's rotated loops): the order follows the edges, not the
  # numbers; the exit 9 ranks after every block of the loop
  succ = {0: (5,), 2: (5,), 5: (2, 9), 9: ()}
  r = _rank(weak_topological_order(0, succ))
  assert r[0] < r[5] < r[2] < r[9]


def test_every_forward_edge_of_the_corpus_goes_to_a_higher_rank():
  """In each corpus kernel's schedule an edge to an equal or lower rank is a back edge: its target is a loop head
  whose run of ranks contains the edge's source (the loop is contiguous)."""
  for name, spec in KERNELS.items():
    comp = executor.compile_kernel(parse(spec.ptx()).kernels[name])
    succ = executor._successors(comp.blocks)
    rank = {s: b.rank for s, b in comp.blocks.items()}
    assert sorted(rank.values()) == list(range(len(rank)))
    def reach(a, b, lo):      # b reachable from a through blocks ranked >= lo
      seen, todo = {a}, [a]
      while todo:
        x = todo.pop()
        for y in succ.get(x, ()):
          if y not in seen and rank[y] >= lo: seen.add(y); todo.append(y)
      return b in seen
    for u, vs in succ.items():
      for v in vs:
        if rank[v] <= rank[u]:     # a back edge: u lies in v's loop, and so does every block ranked between them
          assert reach(v, u, rank[v]), (name, u, v)
          assert all(reach(b, v, rank[v]) for b in comp.order[rank[v]:rank[u] + 1]), (name, u, v)


# A loop laid out after its exit: `bra $loop` jumps forward into it, and the loop's exit branches back to $after, which
# a schedule by address runs first (the threads that leave early would shuffle with lanes still in the loop). Each
# thread counts to its lane number (lane + 1 iterations), then the warp sums the counts with shfl.sync.bfly.
ROTATED_PTX = """
.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 p_out)
{
  .reg .b32 %r<8>;
  .reg .b64 %rd<4>;
  .reg .pred %p<2>;
  mov.u32 %r1, %tid.x;
  and.b32 %r2, %r1, 31;
  mov.u32 %r3, 0;
  bra.uni $loop;
$after:
  shfl.sync.bfly.b32 %r4, %r3, 16, 31, -1;
  add.s32 %r3, %r3, %r4;
  shfl.sync.bfly.b32 %r4, %r3, 8, 31, -1;
  add.s32 %r3, %r3, %r4;
  shfl.sync.bfly.b32 %r4, %r3, 4, 31, -1;
  add.s32 %r3, %r3, %r4;
  shfl.sync.bfly.b32 %r4, %r3, 2, 31, -1;
  add.s32 %r3, %r3, %r4;
  shfl.sync.bfly.b32 %r4, %r3, 1, 31, -1;
  add.s32 %r3, %r3, %r4;
  ld.param.u64 %rd1, [p_out];
  mul.wide.u32 %rd2, %r1, 4;
  add.s64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r3;
  ret;
$loop:
  add.s32 %r3, %r3, 1;
  setp.gt.s32 %p1, %r3, %r2;
  @%p1 bra $after;
  bra.uni $loop;
}
"""


def test_threads_leaving_a_loop_laid_out_after_its_exit_wait_for_the_warp():
  k = parse(ROTATED_PTX).kernels["k"]
  hm = HostMemory()
  addr, out = hm.array(np.zeros(256, np.uint32))
  run(k, (1,), (256,), pack_params(k, [addr]), hm.mem)
  assert (out == sum(range(1, 33))).all(), out[:32]


def test_a_module_parsed_again_reuses_the_translation_but_not_the_globals():
  ptx = """
.version 8.0
.target sm_90
.address_size 64
.global .align 4 .u32 counter;
.visible .entry k(.param .u64 p_out)
{
  .reg .b32 %r<3>;
  .reg .b64 %rd<2>;
  atom.global.add.u32 %r1, [counter], 1;
  ld.param.u64 %rd1, [p_out];
  st.global.u32 [%rd1], %r1;
  ret;
}
"""
  a, b = parse(ptx).kernels["k"], parse(ptx).kernels["k"]
  other = parse(ptx.replace("add.u32 %r1, [counter], 1", "add.u32 %r1, [counter], 5")).kernels["k"]
  assert executor.compile_kernel(a) is executor.compile_kernel(b)
  assert executor.compile_kernel(other) is not executor.compile_kernel(a)
  hm = HostMemory()
  addr, out = hm.array(np.zeros(1, np.uint32))
  got = []
  for k in (a, a, b, other, other):      # each module's __device__ counter is its own
    run(k, (1,), (1,), pack_params(k, [addr]), hm.mem)
    got.append(int(out[0]))
  assert got == [0, 1, 0, 0, 5]


SCALED = ["local_array", "divergent", "shuffle", "matmul_tiled", "atomics", "atomics_shared", "reduce_shared",
          "grid2d", "grid3d", "int128", "uniform_loop", "dyn_shared", "vadd"]


@pytest.mark.parametrize("name", SCALED)
def test_corpus_kernel_grown_to_many_ctas_gives_numpys_answer(name):
  spec = scaled(KERNELS[name], 8192)
  assert threads_of(spec) >= 4096 and threads_of(spec) > threads_of(KERNELS[name])
  outputs, data, stats = run_corpus_kernel(spec, seed=3)
  spec.check(outputs, data)
  assert stats["threads"] == threads_of(spec)


@pytest.mark.parametrize("name", ["local_array", "shuffle", "atomics_shared", "matmul_tiled"])
def test_corpus_kernel_split_over_small_batches_matches_one_batch(name, monkeypatch):
  spec = scaled(KERNELS[name], 4096)
  whole, data, st1 = run_corpus_kernel(spec, seed=5)
  monkeypatch.setattr(executor, "BATCH_THREADS", 512)
  split, _, st2 = run_corpus_kernel(spec, seed=5)
  spec.check(split, data)
  if name != "atomics_shared":    # (its CAS loop retries as often as other lanes of the batch got there first)
    assert st1["thread_instructions"] == st2["thread_instructions"]
  for key, v in whole.items():
    assert v.tobytes() == split[key].tobytes(), key


@pytest.mark.parametrize("name", ["divergent", "local_array", "atomics_shared", "reduce_shared", "intdiv"])
def test_compacted_groups_run_on_and_agree_with_masked_execution(name, monkeypatch):
  """A small group runs as a batch of its own for as long as no other thread waits before it (executor
  _run_compacted: a whole data-dependent loop, not one block at a time); every block run masked over the whole batch
  instead gives the same bytes."""
  spec = scaled(KERNELS[name], 4096)
  calls, blocks = [], []
  real, real_fns = executor._run_compacted, executor._run_fns
  monkeypatch.setattr(executor, "_run_compacted", lambda *a: calls.append(1) or real(*a))
  monkeypatch.setattr(executor, "_run_fns", lambda S, blk, m: blocks.append(isinstance(S, executor._Compacted))
                      or real_fns(S, blk, m))
  compacted, data, st1 = run_corpus_kernel(spec, seed=4)
  spec.check(compacted, data)
  if name in ("divergent", "local_array"):    # data-dependent loops: each group's run covers many blocks
    assert calls and sum(blocks) > len(calls), (len(calls), sum(blocks))
  monkeypatch.setattr(executor, "COMPACT_BELOW", 10**9)
  masked, _, st2 = run_corpus_kernel(spec, seed=4)
  for key, v in compacted.items():
    if name == "atomics_shared" and key == "cas_max": continue   # (a CAS race: either order is a valid result)
    assert v.tobytes() == masked[key].tobytes(), key


def test_the_translation_cache_is_bounded(monkeypatch):
  monkeypatch.setattr(executor, "COMPILED_CACHE", {})
  monkeypatch.setattr(executor, "COMPILED_CACHE_SIZE", 2)
  texts = [ROTATED_PTX.replace("mov.u32 %r3, 0;", f"mov.u32 %r3, {i};") for i in range(3)]
  kernels = [parse(t).kernels["k"] for t in texts]
  for k in kernels: executor.compile_kernel(k)
  assert len(executor.COMPILED_CACHE) == 2 and kernels[0].source_key not in executor.COMPILED_CACHE
  assert executor.compile_kernel(parse(texts[2]).kernels["k"]) is executor.compile_kernel(kernels[2])
