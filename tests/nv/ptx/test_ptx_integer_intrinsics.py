"""The integer instructions CUDA intrinsics compile to (__sad, __byte_perm modes, __fns, __dp4a/__dp2a, bmsk, szext),
each against a reference written from the PTX ISA's own description with plain Python integers."""
import numpy as np
import pytest

from tests.nv.ptx.test_ptx_interp import apply

rng = np.random.default_rng(7)
A = rng.integers(0, 2**32, 256, dtype=np.uint64).astype(np.uint32)
B = rng.integers(0, 2**32, 256, dtype=np.uint64).astype(np.uint32)
C = rng.integers(0, 2**32, 256, dtype=np.uint64).astype(np.uint32)


def s32(x): return x - (1 << 32) if x >= 1 << 31 else x


def test_sad_signed_and_unsigned():
  got = apply("sad.u32 %d, %a, %b, %c;", np.uint32, A, B, C)
  assert [int(g) for g in got] == [(int(c) + abs(int(a) - int(b))) & 0xFFFFFFFF for a, b, c in zip(A, B, C)]
  a, b, c = A.view(np.int32), B.view(np.int32), C.view(np.int32)
  got = apply("sad.s32 %d, %a, %b, %c;", np.int32, a, b, c)
  assert [int(g) for g in got] == [s32((int(z) + abs(int(x) - int(y))) & 0xFFFFFFFF) for x, y, z in zip(a, b, c)]


# the ISA's table: for each mode and selector c[1:0], the source byte (of {b, a}, a = bytes 0-3) of d.b3 d.b2 d.b1 d.b0
PRMT_TABLE = {"f4e": ["3210", "4321", "5432", "6543"], "b4e": ["5670", "6701", "7012", "0123"],
              "rc8": ["0000", "1111", "2222", "3333"], "ecl": ["3210", "3211", "3222", "3333"],
              "ecr": ["0000", "1110", "2210", "3210"], "rc16": ["1010", "3232", "1010", "3232"]}


@pytest.mark.parametrize("mode", sorted(PRMT_TABLE))
def test_prmt_modes_follow_the_isa_table(mode):
  got = apply(f"prmt.b32.{mode} %d, %a, %b, %c;", np.uint32, A, B, C)
  for a, b, c, g in zip(A, B, C, got):
    src = (int(b) << 32 | int(a)).to_bytes(8, "little")
    order = PRMT_TABLE[mode][int(c) & 3]          # d.b3 .. d.b0
    want = bytes(src[int(order[3 - i])] for i in range(4))
    assert int(g) == int.from_bytes(want, "little"), (mode, hex(a), hex(b), int(c) & 3)


def test_dp4a_and_dp2a():
  for at, bt in (("u32", "u32"), ("s32", "u32"), ("s32", "s32")):
    got = apply(f"dp4a.{at}.{bt} %d, %a, %b, %c;", np.uint32, A, B, C)
    for a, b, c, g in zip(A, B, C, got):
      ab, bb = int(a).to_bytes(4, "little"), int(b).to_bytes(4, "little")
      x = [v - 256 if at == "s32" and v >= 128 else v for v in ab]
      y = [v - 256 if bt == "s32" and v >= 128 else v for v in bb]
      assert int(g) == (int(c) + sum(p * q for p, q in zip(x, y))) & 0xFFFFFFFF
  for half in ("lo", "hi"):
    got = apply(f"dp2a.{half}.s32.s32 %d, %a, %b, %c;", np.uint32, A, B, C)
    for a, b, c, g in zip(A, B, C, got):
      hs = [int(a) & 0xFFFF, int(a) >> 16]
      hs = [h - 65536 if h >= 32768 else h for h in hs]
      bb = int(b).to_bytes(4, "little")[(2 if half == "hi" else 0):][:2]
      y = [v - 256 if v >= 128 else v for v in bb]
      assert int(g) == (int(c) + hs[0] * y[0] + hs[1] * y[1]) & 0xFFFFFFFF


def _fns_ref(mask, base, offset):
  if offset == 0: return base if (mask >> base) & 1 else 0xFFFFFFFF
  count, pos, step = abs(offset) - 1, base, 1 if offset > 0 else -1
  while 0 <= pos < 32:
    if (mask >> pos) & 1:
      if count == 0: return pos
      count -= 1
    pos += step
  return 0xFFFFFFFF


def test_fns_finds_the_nth_set_bit_both_ways():
  base = (B % 32).astype(np.uint32)
  off = ((C % 11).astype(np.int64) - 5).astype(np.int32)
  got = apply("fns.b32 %d, %a, %b, %c;", np.uint32, A, base, off)
  assert [int(g) for g in got] == [_fns_ref(int(m), int(b), int(o)) for m, b, o in zip(A, base, off)]


def test_bmsk_and_szext_clamp_and_wrap():
  a = (A % 40).astype(np.uint32)
  b = (B % 40).astype(np.uint32)
  for mode in ("clamp", "wrap"):
    got = apply(f"bmsk.{mode}.b32 %d, %a, %b;", np.uint32, a, b)
    for x, y, g in zip(a, b, got):
      x, y = (int(x) & 31, int(y) & 31) if mode == "wrap" else (min(int(x), 32), min(int(y), 32))
      assert int(g) == (((1 << y) - 1) << x) & 0xFFFFFFFF
    for t in ("u32", "s32"):
      got = apply(f"szext.{mode}.{t} %d, %a, %b;", np.uint32, A, b)
      for v, y, g in zip(A, b, got):
        n = int(y) & 31 if mode == "wrap" else min(int(y), 32)
        low = int(v) & ((1 << n) - 1)
        if t == "s32" and n and low >> (n - 1): low -= 1 << n
        assert int(g) == low & 0xFFFFFFFF
