"""issue 33 P1, the launch path's kept state against its definition. CommandBuffer.fill patches a 64-bit value's low and high dwords from one look-up (its flattened
patches pair lo(sym) and hi(sym) at consecutive positions): what it fills is each patch's definition
(Patch.value) at its position, for any layout of patches (pairs, lone halves, the high dword first, other adds or
shifts, several keys), also after link() resolved some of them. RingEngine.mark (a partial of getattr, no Python
frame) is the ring's write position whenever it is asked."""
from array import array

from hypothesis import given, settings, strategies as st

from hcq.drivers.hcq.cmdbuf import CommandBuffer, Patch, Sym, hi, link, lo

KEYS = ["a", "b", ("var", "timeline")]


@st.composite
def words_and_values(draw):
  words = []
  for _ in range(draw(st.integers(0, 12))):
    kind = draw(st.sampled_from(["int", "pair", "lo", "hi", "hi-lo", "shift"]))
    sym = Sym(draw(st.sampled_from(KEYS)), draw(st.integers(-8, 1 << 40)))
    if kind == "int": words.append(draw(st.integers(0, 0xFFFFFFFF)))
    elif kind == "pair": words += [lo(sym), hi(sym)]
    elif kind == "lo": words.append(lo(sym))
    elif kind == "hi": words.append(hi(sym))
    elif kind == "hi-lo": words += [hi(sym), lo(sym)]
    else: words.append(Patch(sym.key, draw(st.integers(0, 40)), sym.add))
  values = {k: draw(st.integers(0, (1 << 64) - 1)) for k in KEYS}
  return words, values


def expected(words, values) -> array:
  return array("I", [w if isinstance(w, int) else w.value(values) for w in words])


@settings(max_examples=300, deadline=None)
@given(words_and_values())
def test_fill_is_each_patch_at_its_position(case):
  words, values = case
  cb = CommandBuffer(words, "compute")
  assert cb.fill(values) == expected(words, values)
  assert cb.fill(values) == cb.fill(dict(values))        # a fresh template copy each time
  partial = {KEYS[0]: values[KEYS[0]]}
  assert link(cb, partial).fill(values) == expected(words, values)


def test_a_pair_is_one_flattened_entry_and_the_template_is_untouched():
  t = Sym(("var", "timeline"))
  cb = CommandBuffer([0xC0DE, lo(t), hi(t), hi(t + 4), lo(t + 4), lo(t)], "compute")
  assert len(cb._flat) == 4                               # the first pair is one entry; the others are not pairs
  out = cb.fill({("var", "timeline"): 0x1_2345_6789})
  assert list(out) == [0xC0DE, 0x2345_6789, 1, 1, 0x2345_678D, 0x2345_6789]
  assert list(cb.template) == [0xC0DE, 0, 0, 0, 0, 0]


def test_a_ring_engines_mark_is_its_rings_write_position():
  import hcq
  from hcq.drivers.amd.kernels import demo_code_object
  with hcq.open("MOCK+AMD") as dev:
    engine = dev.compute
    ring = engine.ring
    prog = dev.load(demo_code_object(), "empty")
    for _ in range(3):
      prog(global_size=(1,), local_size=(1,))
      assert engine.mark() == ring.put_dw == ring.published_dw > 0
    m = engine.mark()
    engine.write(array("I", [0] * 4))           # words not committed: rolled back to the mark
    assert engine.mark() == m + 4
    engine.rollback(m)
    assert engine.mark() == m
    dev.synchronize()
