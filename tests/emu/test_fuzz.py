"""Fuzzing: random instruction words through the decoder and the emulator raise nothing but hcq's own errors and
never touch memory outside the mappings (the host process survives). The default run is short; the long one
(60 s+) is `pytest -m slow tests/emu/test_fuzz.py`."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hcq.errors import HCQError
from hcq.mockgpu.amd.emu import GPUMemory, ScratchSetup, dispatch
from hcq.mockgpu.amd.emu.decode import decode

from .loader import HostBuffers

S_ENDPGM = 0xBFB00000
WORDS = st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=12)
# bias towards real encodings: pick the top bits from the gfx11 encoding prefixes, the rest random
PREFIXES = [0x80000000, 0xB0000000, 0xBE800000, 0xBF000000, 0xBF800000, 0xF4000000, 0x00000000, 0x7E000000,
            0x7C000000, 0xD4000000, 0xD6000000, 0xCC000000, 0xC8000000, 0xD8000000, 0xDC000000]
BIASED = st.lists(st.tuples(st.sampled_from(PREFIXES), st.integers(0, 2**26 - 1), st.integers(0, 2**32 - 1)),
                  min_size=1, max_size=8).map(lambda ws: [w for p, lo, extra in ws for w in (p | lo, extra)])


class Target:
  def __init__(self):
    self.mem = GPUMemory()
    self.bufs = HostBuffers(self.mem)
    self.pcode, self.code = self.bufs.alloc(4096)
    self.pdata, self.data = self.bufs.alloc(1 << 16)
    self.guard = np.zeros(4096, np.uint8)   # host memory next to nothing mapped: must stay untouched

  def run(self, words):
    code = np.array(list(words) + [S_ENDPGM] * 4, np.uint32)
    self.code[:] = 0
    self.code[:code.nbytes] = code.view(np.uint8)
    try:
      dispatch(self.mem, pgm_addr=self.pcode, rsrc1=0x3F, rsrc2=(4 << 1) | (1 << 7) | (2 << 11),
               user_sgprs=[self.pdata & 0xFFFFFFFF, self.pdata >> 32, self.pdata & 0xFFFFFFFF, self.pdata >> 32],
               grid=(2, 1, 1), block=(8, 4, 2), lds_bytes=1024, scratch=ScratchSetup(None, 64),
               instruction_budget=20_000)
    except HCQError:
      pass
    assert not self.guard.any()


TARGET = Target()
FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck), database=None)


@given(WORDS)
@FUZZ
def test_decoder_raises_only_hcq_errors(words):
  data = np.array(words, np.uint32).tobytes()
  off = 0
  while off < len(data):
    try:
      inst = decode(data, off)
    except HCQError:
      off += 4
      continue
    assert inst.size >= 4
    off += inst.size


@given(WORDS)
@FUZZ
def test_random_words_run_or_raise_hcq_errors(words):
  TARGET.run(words)


@given(BIASED)
@FUZZ
def test_encoding_biased_words_run_or_raise_hcq_errors(words):
  TARGET.run(words)


LONG = settings(max_examples=20_000, derandomize=False, deadline=None, suppress_health_check=list(HealthCheck), database=None)


@pytest.mark.slow
@given(BIASED)
@LONG
def test_fuzz_emulator_long(words):
  """20,000 programs: 99-144 s measured on the project's 2-core machine."""
  TARGET.run(words)


@pytest.mark.slow
@given(WORDS)
@settings(max_examples=50_000, derandomize=False, deadline=None, suppress_health_check=list(HealthCheck), database=None)
def test_fuzz_decoder_long(words):
  """50,000 word lists: about 80 s (25,000 took 39 s, 100,000 took 546 s when the 2-core machine was loaded)."""
  test_decoder_raises_only_hcq_errors.hypothesis.inner_test(words)
