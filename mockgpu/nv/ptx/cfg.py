"""The order in which the executor runs a kernel's basic blocks when its threads diverge, computed once per kernel.

The scheduler (executor.py) runs the waiting group of lowest rank. Ranking blocks by address (the PTX order) makes
threads reconverge where the compiler laid the merge point out after both paths, but clang places a loop's latch
blocks before its header ("rotated" loops): a thread leaving an inner loop jumps back to a lower address and runs on
alone while the rest of the loop waits, so the threads split into many small groups (thousands of steps for
tests/fixtures/cuda/local_array.cu's insertion sort on 65,536 threads).

Here the rank is a weak topological order of the control-flow graph (F. Bourdoncle, "Efficient chaotic iteration
strategies with widenings", FMPA 1993, section 4.3): every loop (strongly connected component) is one contiguous
run of ranks with its head first, nested loops inside it, and every edge that is not a back edge to a loop head goes
to a higher rank. A loop's exit therefore ranks after the whole loop: threads that leave it wait at the exit until the
last thread of the batch has left, and then run on together (reconvergence at the loop's exit, as the SIMT stack of
the hardware gives a warp). Any rank order is a correct schedule for independent threads; this one keeps them in as
few groups as the branches allow, which is also what warp-level instructions after a loop need.
"""
from __future__ import annotations

import sys


def weak_topological_order(entry: int, succ: dict) -> list:
  """The nodes reachable from entry in a weak topological order (Bourdoncle's recursive algorithm, flattened).
  succ: node -> successors in the order they are explored."""
  INF = float("inf")
  dfn: dict = {}
  stack: list = []
  counter = [0]

  def visit(v, out: list) -> float:
    stack.append(v)
    counter[0] += 1
    head = dfn[v] = counter[0]
    loop = False
    for w in succ.get(v, ()):
      m = visit(w, out) if dfn.get(w, 0) == 0 else dfn[w]
      if m <= head:
        head, loop = m, True
    if head == dfn[v]:
      dfn[v] = INF
      e = stack.pop()
      if loop:
        while e != v:
          dfn[e] = 0
          e = stack.pop()
        out[:0] = component(v)
      else: out.insert(0, v)
    return head

  def component(v) -> list:
    part: list = []
    for w in succ.get(v, ()):
      if dfn.get(w, 0) == 0: visit(w, part)
    return [v] + part

  limit = sys.getrecursionlimit()
  sys.setrecursionlimit(max(limit, 4 * len(succ) + 1000))   # a straight chain of blocks recurses once per block
  try:
    out: list = []
    visit(entry, out)
  finally: sys.setrecursionlimit(limit)
  return out
