"""The vectorised paths of mockgpu/nv/ptx/memspace.py against their scalar definitions: shared/local offsets checked
in two passes (misaligned, negative and past-the-end offsets still fault, naming the offset), and atom.cas on one
word as one search per swap."""
from __future__ import annotations

import numpy as np
import pytest

from hcq.errors import GPUFault
from hcq.mockgpu.gpumem import GPUMemory
from hcq.mockgpu.nv.ptx import memspace
from hcq.mockgpu.nv.ptx.memspace import LOCAL_WINDOW, Spaces


def _spaces(nblocks=2, per_block=8, shared_bytes=64, local_bytes=48):
  n = nblocks * per_block
  blk = np.repeat(np.arange(nblocks, dtype=np.int64), per_block)
  sp = Spaces(GPUMemory(), np.zeros(nblocks * shared_bytes, np.uint8), shared_bytes,
              np.zeros(n * local_bytes, np.uint8), local_bytes, blk, np.zeros(16, np.uint8))
  sp.sh_stride, sp.lo_stride = shared_bytes, local_bytes
  return sp


@pytest.mark.parametrize("space", ["shared", "local"])
def test_window_indices_are_each_lanes_own_slot(space):
  sp = _spaces()
  rng = np.random.default_rng(0)
  limit = 64 if space == "shared" else 48
  for k, dt in ((1, np.uint8), (2, np.uint16), (4, np.uint32), (8, np.uint64)):
    off = rng.integers(0, limit // k, sp.n).astype(np.uint64) * np.uint64(k)
    vals = rng.integers(0, 2**(8 * k) - 1, sp.n, dtype=np.uint64).astype(dt)
    sp.store(space, off, None, dt, k, vals)
    raw = sp.shared if space == "shared" else sp.local
    owner = sp.block_of_lane if space == "shared" else np.arange(sp.n)
    for lane in range(sp.n):     # the scalar definition: the lane's slot, then the offset
      if (owner == owner[lane]).sum() > 1 and space == "shared":
        later = [j for j in range(lane + 1, sp.n) if owner[j] == owner[lane] and off[j] == off[lane]]
        if later: continue       # a later lane of the CTA wrote the same bytes
      at = int(owner[lane]) * limit + int(off[lane])
      assert raw[at:at + k].view(dt)[0] == vals[lane], (space, k, lane)
    sel = np.arange(0, sp.n, 3)
    got = sp.load(space, off[sel], sel, dt, k)
    want = [raw[int(owner[j]) * limit + int(off[j]):][:k].view(dt)[0] for j in sel]
    assert got.tolist() == [int(w) for w in want]


@pytest.mark.parametrize("space,limit", [("shared", 64), ("local", 48)])
def test_window_faults_name_the_offset(space, limit):
  sp = _spaces()
  off = np.zeros(sp.n, np.uint64)
  off[5] = limit                                       # a 4-byte access past the end
  with pytest.raises(GPUFault, match=rf"{space} memory access of 4 bytes at offset {limit:#x} beyond"):
    sp.load(space, off, None, np.uint32, 4)
  off[5] = 6                                           # misaligned
  with pytest.raises(GPUFault, match=f"misaligned 4-byte {space} access") as e: sp.load(space, off, None, np.uint32, 4)
  assert e.value.address == 6
  neg = np.zeros(sp.n, np.int64)
  neg[3] = -8                                          # below the start (as a 64-bit register holds it)
  with pytest.raises(GPUFault, match=rf"offset -0x8 beyond"): sp.store(space, neg, None, np.uint32, 4, np.ones(sp.n, np.uint32))
  gen = np.full(sp.n, LOCAL_WINDOW, np.uint64)         # a generic address in the local window keeps its base
  gen[1] += np.uint64(48)
  if space == "local":
    with pytest.raises(GPUFault, match="beyond the thread's 48 bytes") as e: sp.load("generic", gen, None, np.uint32, 4)
    assert e.value.address == LOCAL_WINDOW + 48


def _cas_scalar(cur, cmp, new):
  olds = []
  for b, c in zip(cmp.tolist(), new.tolist()):
    olds.append(cur)
    if cur == b: cur = c
  return olds, cur


@pytest.mark.parametrize("pattern", ["random", "chain", "none", "late"])
def test_cas_run_matches_lane_by_lane(pattern):
  rng = np.random.default_rng(1)
  L = 3 * memspace.CAS_WINDOW + 17
  if pattern == "random": cmp, new = rng.integers(0, 4, L), rng.integers(0, 4, L)
  elif pattern == "chain": cmp, new = np.arange(L), np.arange(L) + 1          # every lane swaps
  elif pattern == "none": cmp, new = np.full(L, 99), np.zeros(L, np.int64)
  else: cmp, new = np.full(L, 99), np.zeros(L, np.int64); cmp[-3] = 0; new[-3] = 7   # one swap past the window
  cmp, new = cmp.astype(np.uint32), new.astype(np.uint32)
  olds, final = memspace._cas_run(np.uint32(0), cmp, new)
  want, wfinal = _cas_scalar(0, cmp, new)
  assert olds.tolist() == want and int(final) == wfinal


@pytest.mark.parametrize("space", ["shared", "local", "global", "generic"])
def test_kept_register_addresses_index_like_the_checked_path(space):
  """Spaces.indexed (a register's addresses summarised once, then each offset checked from the summary) gives the
  checked path's elements where the access is valid, and None (the checked path then faults) where any lane's is
  not; also for a register whose values lie below the range and an offset that brings them in."""
  sp = _spaces()
  rng = np.random.default_rng(2)
  buf = np.zeros(256 + 64, np.uint8)
  start = buf.ctypes.data + (-buf.ctypes.data) % 64
  sp.mem.add_range(start, 256)
  limit = {"shared": 64, "local": 48}.get(space, 256)
  origin = 0 if space in ("shared", "local") else start
  hits = faults = 0
  for trial in range(60):
    k = int(rng.choice([1, 2, 4, 8]))
    wide = trial % 2 == 0
    vals = origin + rng.integers(0, limit // k, sp.n) * k               # the addresses the lanes access
    if trial % 4 == 1: vals[int(rng.integers(sp.n))] = origin + limit   # one lane past the end
    if trial % 4 == 2: vals[int(rng.integers(sp.n))] = origin - k       # one lane before the start
    if trial % 4 == 3 and k > 1: vals[int(rng.integers(sp.n))] += 1     # one lane misaligned
    off = int(rng.integers(-limit // k, limit // k)) * k
    R = (vals - off).astype(np.uint64 if wide else np.uint32) if origin == 0 or wide else None
    if R is None: continue                                              # (a host address needs 64 bits)
    got = sp.indexed(space, 7, R, off, np.dtype(f"u{k}"), k)
    addrs = (R.astype(np.uint64) + np.uint64(off & (2**64 - 1)))
    try: parts = sp.resolve(space, addrs, None, np.dtype(f"u{k}"), k, "load")
    except GPUFault:
      assert got is None, (space, k, off)
      faults += 1
      continue
    if got is None: continue                                            # (allowed: the checked path decides)
    arr, idx = got
    (carr, cidx, _), = parts
    assert arr.ctypes.data == carr.ctypes.data and np.array_equal(idx, cidx), (space, k, off)
    hits += 1
  assert hits >= 10 and faults >= 5, (hits, faults)


MASKED_LOAD_PTX = """
.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 p_in, .param .u64 p_out, .param .u32 p_wild)
{
  .reg .b32 %r<8>;
  .reg .b64 %rd<8>;
  .reg .pred %p<3>;
  mov.u32 %r1, %tid.x;
  ld.param.u64 %rd1, [p_in];
  ld.param.u64 %rd2, [p_out];
  ld.param.u32 %r5, [p_wild];
  mul.wide.u32 %rd3, %r1, 4;
  add.s64 %rd4, %rd1, %rd3;
  and.b32 %r2, %r1, 3;
  setp.eq.u32 %p1, %r2, 3;
  setp.ne.u32 %p2, %r5, 0;
  and.pred %p2, %p2, %p1;
  @%p2 mov.u64 %rd4, 16;
  mov.u32 %r4, 7;
  @%p1 bra $skip;
  ld.global.u32 %r4, [%rd4+4];
$skip:
  add.s64 %rd5, %rd2, %rd3;
  st.global.u32 [%rd5], %r4;
  ret;
}
"""


@pytest.mark.parametrize("wild", [0, 1])
def test_a_masked_load_reads_every_lanes_address_only_when_all_are_valid(wild, monkeypatch):
  """Under a mask (3 of 4 lanes load), a load through [%reg+imm] gathers for every lane when every lane's address
  is valid (the idle lanes' values are then dropped by the masked write), and takes the checked path, which looks
  at the active lanes only, when an idle lane holds an unmapped address (no fault)."""
  from hcq.mockgpu.nv.ptx import parse, run
  from ptx_launch import HostMemory, pack_params
  k = parse(MASKED_LOAD_PTX).kernels["k"]
  hm = HostMemory()
  src = np.arange(1000, 1000 + 129, dtype=np.uint32)
  ia, _ = hm.array(src)
  oa, out = hm.array(np.zeros(128, np.uint32))
  used = []
  real = Spaces.indexed
  monkeypatch.setattr(Spaces, "indexed", lambda self, *a: used.append(real(self, *a) is not None) or real(self, *a))
  run(k, (1,), (128,), pack_params(k, [ia, oa, np.uint32(wild)]), hm.mem)
  t = np.arange(128)
  assert out.tolist() == np.where(t % 4 == 3, 7, src[t + 1]).tolist()
  assert used == [not wild, True], used      # the masked load, then the store (every lane)
