"""What the mock Adreno keeps between submissions (issue 33 P9) does what running afresh does: the command processor's
plan of a stream (a stream with the same length and packet headers runs by the plan made when one ran packet by
packet; CP_EVENT_WRITE, CP_REG_TO_MEM and CP_LOAD_STATE6 are decoded by their first body dword), the ir3 Dispatch
kept per code, grid and registers (run again with its per-run state fresh, its one-batch set-up kept) and the KGSL
model's object kept per page."""
from __future__ import annotations

import ctypes

import numpy as np
import pytest

import hcq
from hcq.autogen.qcom import a6xx, adreno_pm4 as pm4
from hcq.config import Config
from hcq.drivers.qcom import cp
from hcq.errors import GPUFault

from .test_programs import run

ALWAYS_ON = 0x980                     # CP_ALWAYS_ON_COUNTER (the mock's A6XX_ALWAYS_ON)
CACHE_FLUSH_TS = pm4.ENUMS["vgt_event_type"]["CACHE_FLUSH_TS"]
INVALIDATE = a6xx.REG_A6XX_HLSQ_INVALIDATE_CMD


@pytest.fixture
def dev():
  with hcq.open("MOCK+QCOM", config=Config(timeout_s=10.0)) as d: yield d


def model(dev): return dev.owned_os.devices[0]


def stream(out: int, src: int, value: int, inval: int, clock: bool = False, wait_ref: int = 0) -> list:
  """A stream of every kind of plan step: registers (a run of packets, HLSQ_INVALIDATE_CMD inside a packet of
  two), a timestamp event (the value, or with TIMESTAMP the clock), CP_REG_TO_MEM of registers and of the always-on
  counter, CP_LOAD_STATE6 constants from memory before and after the invalidate, a shader's place, CP_NOP,
  CP_MEM_WRITE and a CP_WAIT_REG_MEM on out[15] (met unless wait_ref is above it)."""
  ev = cp.event_write(CACHE_FLUSH_TS, out, value)
  if clock: ev[1] |= pm4.CP_EVENT_WRITE_0_TIMESTAMP
  return (cp.pkt4(a6xx.REG_A6XX_HLSQ_CS_NDRANGE_0, value, value + 1, value + 2) + cp.wait_for_idle() + ev +
          cp.reg_to_mem(a6xx.REG_A6XX_HLSQ_CS_NDRANGE_0, out + 8, count=3, is64=False) +
          cp.reg_to_mem(ALWAYS_ON, out + 24) +
          cp.load_state6(pm4.ST6_CONSTANTS, pm4.SB6_CS_SHADER, 1, src_addr=src, dst_off=0) +
          cp.pkt4(INVALIDATE - 1, value ^ 0x55, inval) +
          cp.load_state6(pm4.ST6_CONSTANTS, pm4.SB6_CS_SHADER, 1, src_addr=src + 16, dst_off=1) +
          cp.load_state6(pm4.ST6_SHADER, pm4.SB6_CS_SHADER, 2, src_addr=src + 4096) + cp.set_marker(8) +
          cp.wait_reg_mem_ge(out + 60, wait_ref) + cp.mem_write(out + 36, value + 7, value + 8) +
          cp.pkt4(a6xx.REG_A6XX_SP_CS_CONFIG, value + 3))


def state(c, out, clock: bool = False) -> tuple:
  """The CP's registers, constants, shader and invalidation sets, and out's dwords but the clocks (6-7, and 0-1
  with the TIMESTAMP bit; 1 is 0 without it)."""
  words = np.frombuffer(out.cpu_view, np.uint32).copy()
  words[[0, 1, 6, 7] if clock else [1, 6, 7]] = 0
  return dict(c.regs), c.consts.tolist(), c.shader, set(c._used), set(c._stale), words.tolist()


def fresh_start(c, out, src, k) -> None:
  c.regs.clear()
  c.consts[:] = 0
  c.shader, c._used, c._stale = (0, 0), {"constants", "IBOs"}, set()
  np.frombuffer(out.cpu_view, np.uint32)[:] = 0
  np.frombuffer(out.cpu_view, np.uint32)[15] = 5
  np.frombuffer(src.cpu_view, np.uint32)[:8] = np.arange(8, dtype=np.uint32) + 100 * k


def test_a_planned_stream_does_what_the_packet_by_packet_run_does(dev, monkeypatch):
  c = model(dev).cp
  out, src = dev.alloc(4096), dev.alloc(8192)
  walks = []
  walk = c._walk
  monkeypatch.setattr(c, "_walk", lambda *a: walks.append(a[1]) or walk(*a))
  variants = [(v, inval, clock) for v in (1, 0x1234) for inval in (a6xx.A6XX_HLSQ_INVALIDATE_CMD_CS_IBO,
                                                                    a6xx.A6XX_HLSQ_INVALIDATE_CMD_CS_STATE)
              for clock in (False, True)]
  for k, (value, inval, clock) in enumerate(variants):
    words = stream(out.va, src.va, value, inval, clock)
    c._plans.clear()
    fresh_start(c, out, src, k)
    assert c.packets(words, 0, 0x1000) is None and len(walks) == 1        # packet by packet, the plan kept
    want = state(c, out, clock)
    fresh_start(c, out, src, k)
    assert c.packets(words, 0, 0x1000) is None and len(walks) == 1        # by the plan
    assert state(c, out, clock) == want
    walks.clear()
  # what the stream did, by definition: the timestamp event's value (unless the clock), the registers stored
  got = want[-1]
  assert got[0] == (0 if clock else value) and got[2:5] == [value, value + 1, value + 2] and got[9:11] == [value + 7, value + 8]
  assert want[0][INVALIDATE] == inval and want[0][a6xx.REG_A6XX_SP_CS_CONFIG] == value + 3
  # CS_STATE cleared the first load's constants; the second load came after it
  assert want[1][:4] == [0] * 4 and want[1][4:8] == [100 * k + 4 + i for i in range(4)]


def test_the_plan_follows_the_first_body_dword_it_was_decoded_from(dev):
  """The same headers with CP_EVENT_WRITE's TIMESTAMP bit set: the clock is written, not the value (another plan)."""
  c = model(dev).cp
  out, src = dev.alloc(4096), dev.alloc(8192)
  fresh_start(c, out, src, 0)
  for _ in range(2): c.packets(stream(out.va, src.va, 0x77, 0), 0, 0x1000)
  words = np.frombuffer(out.cpu_view, np.uint32)
  assert words[0] == 0x77
  words[:2] = 0xFFFFFFFF
  c.packets(stream(out.va, src.va, 0x77, 0, clock=True), 0, 0x1000)
  now = c.always_on()
  assert int(words[0]) | int(words[1]) << 32 <= now and words[1] == now >> 32      # the 64-bit always-on counter
  assert len(c._plans[(len(stream(0, 0, 0, 0)), stream(0, 0, 0, 0)[0])]) == 2


def test_a_stream_with_another_header_where_the_plan_has_one_is_checked(dev):
  """The same length and first header, a bad header further on: refused as a packet-by-packet run refuses it."""
  c = model(dev).cp
  out, src = dev.alloc(4096), dev.alloc(8192)
  fresh_start(c, out, src, 0)
  words = stream(out.va, src.va, 3, 0)
  c.packets(words, 0, 0x1000)
  i = len(cp.pkt4(a6xx.REG_A6XX_HLSQ_CS_NDRANGE_0, 0, 0, 0))          # CP_WAIT_FOR_IDLE's header
  bad = list(words)
  bad[i] ^= 1 << 23                                                       # its opcode's parity bit
  with pytest.raises(GPUFault, match="bad parity") as e:
    c.packets(bad, 0, 0x1000)
  assert e.value.address == 0x1000 + 4 * i


def test_a_planned_stream_stops_where_the_packet_by_packet_run_stops(dev):
  """A CP_WAIT_REG_MEM not met: the plan stops at its packet as the walk does, the packets before it done."""
  c = model(dev).cp
  out, src = dev.alloc(4096), dev.alloc(8192)
  fresh_start(c, out, src, 0)
  c.packets(stream(out.va, src.va, 1, 0), 0, 0x1000)                      # ran to its end: the plan kept
  got = []
  for plans in (True, False):
    if not plans: c._plans.clear()
    fresh_start(c, out, src, 0)
    c.moved = False
    words = stream(out.va, src.va, 9, 0, wait_ref=6)                      # out[15] is 5
    got.append((c.packets(words, 0, 0x1000), c.moved, state(c, out)))
  assert got[0] == got[1]
  pos, moved, (regs, *_, mem) = got[0]
  assert words[pos] == cp.wait_reg_mem_ge(0, 0)[0] and moved and mem[0] == 9 and mem[9] == 0
  assert a6xx.REG_A6XX_SP_CS_CONFIG not in regs


EMPTY = b"@localsize 1, 1, 1\nend\nnop\n"
STORE_IDS = b"""@localsize 64, 1, 1
@buf 256
@invocationid(r0.x)
@wgid(r48.x)
shl.b r1.x, r48.x, 6
(rpt2)nop
add.u r1.x, r1.x, r0.x
(rpt5)nop
stib.b.untyped.1d.u32.1.imm r1.x, r1.x, 0
end
nop
"""


def test_a_kept_dispatch_counts_each_launch_afresh(dev):
  """A kept ir3 Dispatch runs again with nothing executed yet: each launch of the one-fiber program counts 1."""
  c = model(dev).cp
  prog = dev.load(EMPTY, "empty")
  counts = []
  for _ in range(4):
    before = c.instructions
    prog(global_size=(1,), local_size=(1,), wait=True)
    counts.append(c.instructions - before)
  assert counts == [1, 1, 1, 1] and len(c._dispatches) == 1


def test_a_kept_dispatch_again_has_a_fresh_run_state(dev):
  c = model(dev).cp
  prog = dev.load(EMPTY, "empty")
  prog(global_size=(1,), local_size=(1,), wait=True)
  d, = c._dispatches.values()
  d.preamble_done, d.executed, d.deadline = True, 5, 1.0
  mem, ibos = d.mem, np.zeros((1, 16), np.uint32)
  d.again(ibos)
  assert (d.preamble_done, d.executed, d.deadline) == (False, 0, None) and d.ibos is ibos and d.mem is not mem


def test_the_kept_one_batch_set_up_gives_the_ids_of_a_fresh_dispatch(dev):
  """The same grid launched again (its fiber arrays and id rows kept with the dispatch), with another program in
  between: every fiber stores its global id, as at the first launch."""
  c = model(dev).cp
  want = np.arange(256, dtype=np.uint32)
  for k in range(3):
    got, = run(dev, STORE_IDS, [np.full(256, 0xEE, np.uint32)], groups=4)
    np.testing.assert_array_equal(got, want)
    dev.load(EMPTY, "empty")(global_size=(2,), local_size=(1,), wait=True)
  assert sum(d._one is not None for d in c._dispatches.values()) == 2


def test_code_rewritten_in_memory_runs_the_new_code(dev):
  """The same registers and grid, other instruction words at SP_CS_OBJ_START: the new program runs (the kept
  dispatch is found by the code memory holds now)."""
  store = b"@localsize 1, 1, 1\n@buf 4\nmov.u32u32 r0.x, %d\n(rpt5)nop\nstib.b.untyped.1d.u32.1.imm r0.x, r0.y, 0\nend\nnop\n"
  one, two = dev.load(store % 1, "one"), dev.load(store % 2, "two")
  assert one.code_size == two.code_size and one.code_va != two.code_va
  buf = dev.alloc(16)
  one(buf, global_size=(1,), local_size=(1,), wait=True)
  assert np.frombuffer(dev.copyout(buf), np.uint32)[0] == 1
  ctypes.memmove(one.code_va, two.code_va, one.code_size)
  one(buf, global_size=(1,), local_size=(1,), wait=True)
  assert np.frombuffer(dev.copyout(buf), np.uint32)[0] == 2


def test_a_kept_dispatch_takes_the_hang_timeout_set_since(dev):
  prog = dev.load(EMPTY, "empty")
  prog(global_size=(1,), local_size=(1,), wait=True)
  model(dev).hang_timeout_s = -1.0                   # a deadline passed before the dispatch starts
  with pytest.raises(GPUFault, match="hang timeout"):
    prog(global_size=(1,), local_size=(1,), wait=True)


def test_the_object_kept_per_page_is_the_object_found_afresh_and_forgotten_when_freed(dev):
  m = model(dev)
  bufs = [dev.alloc(n) for n in (4096, 3 * 4096, 100)]
  spots = [(b.va + off, size) for b in bufs for off, size in ((0, 4), (8, 16), (b.size - 4, 4), (b.size - 4, 8))]
  for _ in range(2):                                         # found afresh, then through the kept pages
    got = [m.find(va, size) for va, size in spots]
    m._pages.clear()
    assert got == [m.find(va, size) for va, size in spots]
  assert got[0] is got[1] is not None and got[4] is not got[0]
  va = bufs[1].va
  assert m.find(va + 4096, 4) is not None
  dev.free(bufs[1])
  assert m.find(va + 4096, 4) is None
  with pytest.raises(GPUFault, match="outside every memory object"):
    m.check(va + 4096, 4, "a test read")


# ends with an ldib whose result needs (sy): a batch that started from the last batch's sync tables would refuse the
# add reading r1.x at the start
PENDING_AT_END = b"""@localsize 1, 1, 1
@buf 4
mov.u32u32 r0.x, 0
(rpt5)nop
add.u r2.x, r1.x, 1
(rpt5)nop
stib.b.untyped.1d.u32.1.imm r2.x, r0.x, 0
ldib.b.untyped.1d.u32.1.imm r1.x, r0.x, 0
end
nop
"""


def test_a_kept_dispatch_checks_its_sync_from_a_fresh_state_each_time(dev):
  c = model(dev).cp
  for _ in range(3):
    got, = run(dev, PENDING_AT_END, [np.full(4, 9, np.uint32)])
    assert got[0] == 1
  d, = [d for d in c._dispatches.values() if d._sync is not None]
  fresh = type(d._sync)(d._sync.mode)
  d._sync.reset()
  assert np.array_equal(d._sync._tables, fresh._tables) and (d._sync.cycle, d._sync.const_ss) == (0, -1)
  assert d._sync.need_sy.base is d._sync._tables                 # the rows the checks use are the reset tables'


def test_a_restarted_fibers_is_a_fresh_one():
  """The Fibers a small kept dispatch starts again (Fibers.restart) after a run that diverged, finished some fibers
  and used local and private memory: as a new Fibers of the same batch."""
  from hcq.mockgpu.qcom.ir3.state import Fibers
  n, group_of, lid = 8, np.repeat(np.arange(2), 4), np.tile(np.arange(4), 2)
  F = Fibers(n, 2, group_of, lid, 64, 1024, R=np.ones((256, n), np.uint32))
  F.pc = np.arange(n) * 3
  F.alive[::2] = False
  F.sel, F.private = F.alive.copy(), np.ones((n, 4), np.uint8)
  F.local[0, 0] = 7
  R = np.zeros((256, n), np.uint32)
  F.restart(R)
  fresh = Fibers(n, 2, group_of, lid, 64, 1024, R=R)
  assert F.R is R and F.sel is None and F.private is None and F._local is None and not F.local.any()
  for name in ("pc", "alive", "group_of", "lid", "wave_of"):
    np.testing.assert_array_equal(getattr(F, name), getattr(fresh, name))


def test_a_small_kept_dispatch_runs_on_its_fibers_started_again(dev):
  """Its results are a fresh dispatch's (every fiber's id), launch after launch; between launches its Fibers holds
  no register file."""
  c = model(dev).cp
  for _ in range(3):
    got, = run(dev, STORE_IDS, [np.full(256, 0xEE, np.uint32)], groups=4)
    np.testing.assert_array_equal(got, np.arange(256, dtype=np.uint32))
  kept = [d._fibers for d in c._dispatches.values() if d._fibers is not None]
  assert len(kept) == 1 and kept[0].n == 256 and kept[0].R is None


@pytest.mark.parametrize("which", ["event", "clock", "constants"])
def test_a_planned_access_outside_every_object_faults_naming_it(dev, which):
  """The plan's decoded steps check memory as their handlers do: the same stream with one address moved past every
  object faults there, naming the packet and the address."""
  c = model(dev).cp
  out, src = dev.alloc(4096), dev.alloc(8192)
  fresh_start(c, out, src, 0)
  words = stream(out.va, src.va, 3, 0)
  c.packets(words, 0, 0x1000)
  bad_va = 0x10 << 40                                                     # no object there
  ev = len(cp.pkt4(0, 0, 0, 0) + cp.wait_for_idle())                     # CP_EVENT_WRITE's header
  at = {"event": ev + 2, "clock": ev + 5 + 4 + 2,
        "constants": ev + 5 + 8 + 2}[which]                              # the address's low dword
  bad = list(words)
  bad[at], bad[at + 1] = bad_va & 0xFFFFFFFF, bad_va >> 32
  name = {"event": "CP_EVENT_WRITE CACHE_FLUSH_TS", "clock": "CP_REG_TO_MEM", "constants": "CP_LOAD_STATE6"}[which]
  with pytest.raises(GPUFault, match=f"{name}: .* at {bad_va:#x} are outside every memory object") as e:
    c.packets(bad, 0, 0x1000)
  assert e.value.address == bad_va
