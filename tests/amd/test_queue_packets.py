"""Queue programs (hcq.compiler.queue) turned into packets by drivers/amd/packets.py's pattern matchers, and the command buffers
built from them: which packets each element becomes, and which words stay symbolic until submit."""
import pytest

from hcq import DeviceError
from hcq.compiler import queue as Q
from hcq.compiler.ir import UOp
from hcq.drivers.amd import packets, pm4, sdma
from hcq.drivers.hcq.cmdbuf import link
from hcq.drivers.hcq.engine import Engine

CTX = packets.PacketCtx(event_id=7, mailbox_va=0x5000)
SIG, OTHER = Q.signal(0, "timeline"), Q.signal(1, "other")
TV = UOp.variable("tv", 0, 2**32 - 1)


def names(cb, engine):
  return [p[1] for p in (pm4.decode if engine == "compute" else sdma.decode)(list(cb.template))]


def build(prog, engine, ctx):
  """Lower and encode prog on the AMD engine `engine` ("compute": PM4, "copy": SDMA) with the runtime's Engine."""
  return Engine(engine, packets.MATCHERS[engine], ctx).build(prog)


def test_compute_queue_elements_become_pm4_packets():
  prog = Q.queue("compute", Q.wait(OTHER, 5), Q.barrier(), Q.timestamp(OTHER), Q.store(SIG, TV))
  cb = build(prog, "compute", CTX)
  assert names(cb, "compute") == ["WAIT_REG_MEM", "ACQUIRE_MEM", "RELEASE_MEM", "RELEASE_MEM", "RELEASE_MEM"]
  words = cb.fill({("param", 0): 0x1000, ("param", 1): 0x2000, ("var", "tv"): 0x1_0000_0009})
  assert words[:7].tolist() == pm4.wait_reg_mem(0x2000, 5)
  assert words[7:15].tolist() == pm4.acquire_mem(pm4.GCR_ALL)
  assert words[15:23].tolist() == pm4.release_mem(0x2008, 0, pm4.DATA_SEL_GPU_CLOCK, gcr=0)
  assert words[23:31].tolist() == pm4.release_mem(0x1000, 0x1_0000_0009, pm4.DATA_SEL_64)
  # the store also interrupts through the KFD event (its id into the event mailbox)
  assert words[31:39].tolist() == pm4.release_mem(0x5000, 7, pm4.DATA_SEL_32, pm4.INT_SEL_INT_AFTER_WRITE, ctxid=7, gcr=0)


def test_copy_queue_elements_become_sdma_packets():
  dst, src = Q.buffer(3, 4096), Q.buffer(4, 4096)
  prog = Q.queue("copy", Q.wait(OTHER, TV), Q.copy(dst, src, 4096), Q.timestamp(OTHER), Q.barrier(), Q.store(SIG, 9))
  cb = build(prog, "copy", CTX)
  assert names(cb, "copy") == ["POLL_REGMEM", "COPY_LINEAR", "TIMESTAMP_GET_GLOBAL", "FENCE", "FENCE", "TRAP"]
  words = cb.fill({("param", 0): 0x1000, ("param", 1): 0x2000, ("param", 3): 0x30000, ("param", 4): 0x40000,
                   ("var", "tv"): 3}).tolist()
  assert words[:6] == sdma.poll_regmem(0x2000, 3)
  assert words[6:13] == sdma.copy_linear(0x30000, 0x40000, 4096)
  assert words[13:16] == sdma.timestamp(0x2008)
  assert words[16:] == sdma.fence(0x1000, 9) + sdma.fence(0x5000, 7) + sdma.trap(7)


def test_stores_without_interrupts():
  quiet = packets.PacketCtx(event_id=7, mailbox_va=0x5000, interrupts=False)
  pm = build(Q.queue("compute", Q.store(SIG, TV)), "compute", quiet).fill({("param", 0): 0x1000, ("var", "tv"): 3})
  assert pm.tolist() == pm4.release_mem(0x1000, 3, pm4.DATA_SEL_64)
  sd = build(Q.queue("copy", Q.store(SIG, TV)), "copy", quiet).fill({("param", 0): 0x1000, ("var", "tv"): 3})
  assert sd.tolist() == sdma.fence(0x1000, 3)


def test_link_resolves_known_addresses_and_leaves_the_rest_for_submit():
  cb = build(Q.queue("compute", Q.store(SIG, TV)), "compute", CTX)
  assert {p.key for _, p in cb.patches} == {("param", 0), ("var", "tv")}
  linked = link(cb, {("param", 0): 0xABC000})
  assert {p.key for _, p in linked.patches} == {("var", "tv")}
  assert linked.fill({("var", "tv"): 4}).tolist() == cb.fill({("param", 0): 0xABC000, ("var", "tv"): 4}).tolist()
  with pytest.raises(KeyError): linked.fill({})


def test_elements_an_engine_cannot_run_are_errors():
  with pytest.raises(DeviceError, match="copy cannot run on the compute engine"):
    build(Q.queue("compute", Q.copy(Q.buffer(3, 8), Q.buffer(4, 8), 8)), "compute", CTX)
  with pytest.raises(DeviceError, match="dispatch cannot run on the copy engine"):
    build(Q.queue("copy", Q.call(Q.program("k"))), "copy", CTX)
  with pytest.raises(DeviceError, match="constant size"):
    build(Q.queue("copy", Q.copy(Q.buffer(3, 8), Q.buffer(4, 8), TV)), "copy", CTX)
