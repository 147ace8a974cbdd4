"""issue 33 (P6, the launch path): a Ring remembers the read pointer it last saw (Ring.room_dw) and reads the
engine's pointer again only when a write would go past that point. What must hold: writes inside the room already
seen do not read the pointer; a write past it reads the pointer and proceeds when the engine has moved on; and a write
still never overwrites a word the engine has not read (it waits, then times out naming the ring)."""
from array import array

import pytest

from hcq.drivers.hcq.ring import Ring
from hcq.errors import Timeout


class CountingPointer:
  """The engine's read pointer (in dwords), counting the ring's reads of it."""
  def __init__(self, value: int): self.value, self.reads = value, 0
  def __getitem__(self, i: int) -> int:
    assert i == 0
    self.reads += 1
    return self.value


def make_ring(size_dw: int, rptr: CountingPointer) -> Ring:
  t = [0.0]
  def clock():
    t[0] += 0.1
    return t[0]
  return Ring("room-test", memoryview(array("I", [0] * size_dw)), memoryview(array("Q", [0])), rptr,
              lambda v: None, 4, "split", lambda: None, clock, lambda s: None, timeout_s=0.5)


def test_writes_inside_the_room_seen_do_not_read_the_pointer_again():
  rptr = CountingPointer(0)
  ring = make_ring(64, rptr)
  ring.write(array("I", [1] * 8))
  assert rptr.reads == 1 and ring.room_dw == 64          # the first write looked: the whole ring is free
  for _ in range(7): ring.write(array("I", [2] * 8))      # up to 64 dwords: inside what was seen
  assert rptr.reads == 1 and ring.put_dw == 64


def test_a_write_past_the_room_reads_the_pointer_and_goes_on_when_the_engine_moved():
  rptr = CountingPointer(0)
  ring = make_ring(64, rptr)
  ring.write(array("I", range(64)))
  rptr.value = 16                                         # the engine read 16 dwords
  ring.write(array("I", [7] * 16))
  assert rptr.reads == 2 and ring.put_dw == 80 and ring.room_dw == 80
  assert list(ring.ring[:16]) == [7] * 16 and list(ring.ring[16:20]) == [16, 17, 18, 19]


@pytest.mark.parametrize("direct", [False, True])
def test_unread_words_are_never_overwritten(direct):
  from hcq.drivers.hcq.cmdbuf import CommandBuffer
  rptr = CountingPointer(0)
  ring = make_ring(16, rptr)
  ring.write(array("I", range(12)))
  rptr.value = 4                                          # 4 read: room up to put_dw 20
  ring.write(array("I", [9] * 4))                         # put 16 (exactly full up to the room seen)
  before = list(ring.ring)
  with pytest.raises(Timeout, match="room-test ring space for 8 dwords"):
    if direct: ring.write_cmd(CommandBuffer([5] * 8, "compute"), {})
    else: ring.write(array("I", [5] * 8))
  assert list(ring.ring) == before and ring.put_dw == 16  # nothing unread was written over
