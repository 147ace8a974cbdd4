"""ir3 compute programs on MOCK+QCOM: Mesa's computerator examples and hcq's own corpus (tests/qcom/programs), loaded
with dev.load (headers parsed, assembly assembled) and launched through CP_EXEC_CS on the mock's ir3 emulator.

Every expected result is written here from what the instructions are documented to do (Mesa's ir3 ISA description
and computerator's README), computed with numpy independently of the emulator."""
from __future__ import annotations

import glob
import importlib
import os
import pathlib

import numpy as np
import pytest

import hcq
from hcq.config import from_env

PROGRAMS = pathlib.Path(__file__).parent / "programs"
generator = importlib.import_module("hcq.autogen.generator")


@pytest.fixture(scope="module")
def dev():
  d = hcq.open("MOCK+QCOM")
  yield d
  d.close()


def run(dev, text: bytes, inputs, groups=1, name="prog"):
  """Load, bind one buffer per @buf (initialised from inputs, zero where None), launch, return the buffers as u32."""
  prog = dev.load(text, name=name)
  bufs = []
  for (dwords, _), data in zip(prog.kernel.bufs, inputs):
    b = dev.alloc(dwords * 4)
    dev.copyin(b, np.zeros(dwords, np.uint32) if data is None else np.ascontiguousarray(data))
    bufs.append(b)
  prog(*bufs, global_size=(groups,), local_size=prog.kernel.local_size, wait=True)
  out = [np.frombuffer(dev.copyout(b), np.uint32).copy() for b in bufs]
  for b in bufs: dev.free(b)
  return out


@pytest.fixture(scope="module")
def examples() -> str:
  """The folder of Mesa's computerator examples (from the pinned Mesa source package; looked up once: the lookup
  checks the package)."""
  roots = generator.Roots(generator.load_manifest(), from_env().autogen_cache, lambda *a: None)
  try: return roots.path("mesa:src/freedreno/computerator/examples")
  except Exception as e: pytest.skip(f"the Mesa source package is not available here: {e}")


# ---- Mesa's computerator examples
# examples Mesa 25.0.7 added whose headers the program loader does not read yet: "@buf N v0, v1, ..." (initial
# values) and "@localmem N" (shared memory size: SP_CS_UNKNOWN_A9B1 of issue 28, SP_CS_CTRL_REG1 in Mesa 25's a6xx.xml)
MESA_PENDING = {"buf-init.asm": "@buf initial values", "localmem.asm": "@localmem"}


def test_mesa_examples_are_all_covered(examples):
  folder = examples
  assert sorted(os.path.basename(p) for p in glob.glob(os.path.join(folder, "*.asm"))) == sorted({**MESA_EXPECTED, **MESA_PENDING})


def _branch():
  # p0.x = (invocation id > 0); r1.x = 0x87654321, replaced by 0x12345678 unless !p0.x branches over it
  return [np.array([0x87654321] + [0x12345678] * 15, np.uint32)]


MESA_EXPECTED = {
  "branch.asm": _branch,
  # the preamble (one fiber, once) stores r48.xyzw = 1, 2, 3, 4 into c0.xyzw; the main shader stores c0.xyzw
  "early_preamble.asm": lambda: [np.array([1, 2, 3, 4], np.uint32)],
  # each of the 32 invocations stores its id at its id
  "invocationid.asm": lambda: [np.arange(32, dtype=np.uint32)],
  # 0x12345678 stored to private memory and loaded back, stored at element 0
  "pvtmem.asm": lambda: [np.array([0x12345678, 0, 0, 0], np.uint32)],
  # a0.x = (u16)(c0.x + (int)c0.y) = 0, so r<a0.x> is r0.x = 0x12345678, stored at element 0
  "simple.asm": lambda: [np.array([0x12345678, 0, 0, 0], np.uint32)],
  # invocation i stores 0xff at byte base + i * 16 + 2 * 4 and 0xff + 1 at base + i * 16 + 1 * 4 (dwords 4i+2, 4i+1)
  "stg_ldg_offset.asm": lambda: [np.array([v for i in range(16) for v in (0, 0x100, 0xff, 0)] + [0] * 64, np.uint32)],
}


@pytest.mark.parametrize("name", sorted(MESA_EXPECTED))
def test_mesa_computerator_example(dev, examples, name):
  got = run(dev, open(os.path.join(examples, name), "rb").read(), [None] * 4, name=name)
  for g, want in zip(got, MESA_EXPECTED[name]()):
    np.testing.assert_array_equal(g, want)


# ---- hcq's corpus
def program(name: str) -> bytes: return (PROGRAMS / f"{name}.asm").read_bytes()


def test_vector_add(dev):
  a = np.arange(256, dtype=np.float32) * 1.25
  b = np.linspace(-3, 3, 256, dtype=np.float32)
  c = run(dev, program("vadd"), [a, b, None], groups=4)[2].view(np.float32)
  np.testing.assert_array_equal(c, a + b)


def test_integer_alu(dev):
  rng = np.random.default_rng(7)
  inp = rng.integers(0, 2**32, 64, dtype=np.uint64).astype(np.uint32)
  inp[:4] = [0, 1, 0xFFFFFFFF, 0x80000000]
  out = run(dev, program("int_alu"), [inp, None])[1].reshape(32, 16)
  x, y = inp[:32].astype(np.int64), inp[32:].astype(np.int64)
  sx, sy = x - ((x >> 31) << 32), y - ((y >> 31) << 32)     # as signed 32-bit
  m = 0xFFFFFFFF
  clz = np.array([32 - int(v).bit_length() for v in x])
  rev = np.array([int(f"{int(v):032b}"[::-1], 2) for v in x])
  pop = np.array([bin(int(v)).count("1") for v in x])
  # column 3: Mesa's 32-bit multiply lowering (mull.u + two madsh.m16) gives the full product mod 2^32
  want = np.stack([(x + y) & m, (x - y) & m, ((x & 0xFFFFFF) * (y & 0xFFFFFF)) & m, (x * y) & m,
                   (x << 3) & m, x >> 3, (sx >> 3) & m, x & y,
                   x | y, x ^ y, np.minimum(sx, sy) & m, np.maximum(x, y),
                   (-sx) & m, clz, rev, pop], axis=1)
  np.testing.assert_array_equal(out, want.astype(np.uint32))


def test_float_alu(dev):
  rng = np.random.default_rng(3)
  inp = (rng.standard_normal(64) * 10).astype(np.float32)
  inp[:6] = [2.5, -2.5, 0.5, 3.5, -0.0, 7.0]
  out = run(dev, program("float_alu"), [inp, None])[1].reshape(32, 16)
  x, y = inp[:32], inp[32:]
  f = out.view(np.float32)
  np.testing.assert_array_equal(f[:, 0], x + y)
  np.testing.assert_array_equal(f[:, 1], x * y)
  np.testing.assert_array_equal(f[:, 2], np.minimum(x, y))
  np.testing.assert_array_equal(f[:, 3], np.maximum(x, y))
  np.testing.assert_array_equal(f[:, 4], np.floor(x))
  np.testing.assert_array_equal(f[:, 5], np.ceil(x))
  np.testing.assert_array_equal(f[:, 6], np.trunc(x))
  np.testing.assert_array_equal(f[:, 7], np.rint(x))            # rndne: to nearest, ties to even (2.5 -> 2)
  np.testing.assert_array_equal(f[:, 8], np.abs(x))
  np.testing.assert_array_equal(f[:, 9], x - np.float32(0.5))    # (neg)(0.5): the float lookup table's 0.5
  np.testing.assert_array_equal(f[:, 10], x * y + x)
  np.testing.assert_array_equal(out[:, 11], (x < y).astype(np.uint32))        # cmps: 1 or 0
  np.testing.assert_array_equal(out[:, 12].view(np.int32), np.trunc(x).astype(np.int32))   # cov.f32s32 truncates
  np.testing.assert_allclose(f[:, 13], 1 / y, rtol=1e-6)         # rcp, sqrt: the SFU's approximations
  np.testing.assert_allclose(f[:, 14], np.sqrt(np.abs(x)), rtol=1e-6)
  np.testing.assert_array_equal(f[:, 15], np.where(x < y, x, y))  # sel.b32: src2 != 0 ? src1 : src3


def test_divergent_branches(dev):
  lid = np.arange(64, dtype=np.uint32)
  np.testing.assert_array_equal(run(dev, program("branch"), [None])[0], np.where(lid & 1, lid * 2, lid + 100))


def test_loop_with_per_fiber_trip_counts(dev):
  lid = np.arange(64, dtype=np.uint32)
  np.testing.assert_array_equal(run(dev, program("loop"), [None])[0], lid * (lid + 1) // 2)


def test_shared_memory_reduction_with_barriers(dev):
  inp = np.random.default_rng(5).integers(0, 2**32, 256, dtype=np.uint64).astype(np.uint32)
  out = run(dev, program("reduce"), [inp, None], groups=4)[1]
  np.testing.assert_array_equal(out, (inp.reshape(4, 64).astype(np.uint64).sum(1) & 0xFFFFFFFF).astype(np.uint32))


def test_atomics(dev):
  counters, olds = run(dev, program("atomics"), [None, None], groups=2)
  assert counters[0] == 128                                   # atomic.b.add of 1 by 128 fibers
  assert counters[1] == 2 * sum(range(64))                    # atomic.g.add of each local id, two groups
  np.testing.assert_array_equal(counters[2:4], [64, 64])      # atomic.add on local memory, per group
  np.testing.assert_array_equal(np.sort(olds), np.arange(128))   # every fiber saw a different old value


def test_half_precision(dev):
  rng = np.random.default_rng(11)
  inp = (rng.standard_normal(64) * 4).astype(np.float32)
  out = run(dev, program("half"), [inp, None])[1].view(np.float32).reshape(32, 4)
  x, y = inp[:32].astype(np.float16), inp[32:].astype(np.float16)   # cov.f32f16 rounds to nearest
  np.testing.assert_array_equal(out[:, 0], (x * y).astype(np.float32))
  np.testing.assert_array_equal(out[:, 1], (x + y).astype(np.float32))
  np.testing.assert_array_equal(out[:, 2], (x * y + x).astype(np.float32))
  np.testing.assert_array_equal(out[:, 3], np.maximum(x, y).astype(np.float32))


def test_bound_launches_replay(dev):
  prog = dev.load(program("vadd"), "vadd")
  a, b, c = (dev.alloc(256 * 4) for _ in range(3))
  x = np.arange(256, dtype=np.float32)
  dev.copyin(a, x)
  dev.copyin(b, x * 3)
  bound = dev.bind(prog, a, b, c, global_size=(4,), local_size=(64, 1, 1))
  bound(wait=True)
  np.testing.assert_array_equal(np.frombuffer(dev.copyout(c), np.float32), x * 4)
  dev.copyin(b, x)                                  # the same launch again, on new data
  bound(wait=True)
  np.testing.assert_array_equal(np.frombuffer(dev.copyout(c), np.float32), x * 2)
