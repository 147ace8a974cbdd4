"""PM4 and SDMA packet builders against the packet streams the reference runtime is documented to emit on gfx1100
(dwords of a real gfx1100 launch; layouts from Linux nvd.h and sdma_v6_0_0_pkt_open.h), and the decoders on them."""
import pytest

from hcq.drivers.amd import pm4, sdma


def test_pm4_headers_and_bodies_match_the_documented_stream():
  sig = 0x7F0012345678
  assert pm4.wait_reg_mem(sig, 7) == [0xC0053C00, 0x15, 0x12345678, 0x7F00, 7, 0xFFFFFFFF, 4]
  assert pm4.acquire_mem(pm4.GCR_ALL)[0] == 0xC0065800 and pm4.acquire_mem(pm4.GCR_ALL)[-1] == 0xC3F1
  assert pm4.set_sh_reg(pm4.COMPUTE_PGM_LO, 1, 2)[:2] == [0xC0027600, 0x20C]
  assert pm4.set_sh_reg(pm4.COMPUTE_PGM_RSRC1, 0, 0)[1] == 0x212
  assert pm4.set_sh_reg(pm4.COMPUTE_PGM_RSRC3, 0)[:2] == [0xC0017600, 0x228]
  assert pm4.set_sh_reg(pm4.COMPUTE_TMPRING_SIZE, 0)[1] == 0x218
  assert pm4.set_sh_reg(pm4.COMPUTE_DISPATCH_SCRATCH_BASE_LO, 0, 0)[1] == 0x210
  assert pm4.set_sh_reg(pm4.COMPUTE_RESTART_X, 0, 0, 0)[:2] == [0xC0037600, 0x21B]
  assert pm4.set_sh_reg(pm4.COMPUTE_USER_DATA_0, 0, 0)[1] == 0x240
  assert pm4.set_sh_reg(pm4.COMPUTE_RESOURCE_LIMITS, 0)[1] == 0x215
  assert pm4.set_sh_reg(pm4.COMPUTE_START_X, 0, 0, 0, 32, 1, 1, 0, 0)[:2] == [0xC0087600, 0x204]
  init = pm4.INITIATOR_COMPUTE_SHADER_EN | pm4.INITIATOR_FORCE_START_AT_000 | pm4.INITIATOR_CS_W32_EN
  assert pm4.dispatch_direct(2, 1, 1, init) == [0xC0031500, 2, 1, 1, 0x8005]
  assert pm4.event_write(pm4.CS_PARTIAL_FLUSH, pm4.EVENT_INDEX_PARTIAL_FLUSH) == [0xC0004600, 0x407]
  assert pm4.release_mem(sig, 8, pm4.DATA_SEL_32)[:3] == [0xC0064900, 0x70F514, 0x20000000]
  assert pm4.release_mem(sig, 5, pm4.DATA_SEL_32, pm4.INT_SEL_INT_AFTER_WRITE, ctxid=2, gcr=0)[1:3] == [0x514, 0x22000000]
  assert pm4.indirect_buffer(0x1000, 16) == [0xC0023F00, 0x1000, 0, 16 | (1 << 23)]


def test_sdma_packets_match_the_documented_encodings():
  assert sdma.copy_linear(0x2000, 0x1000, 1024) == [0x1, 0x3FF, 0, 0x1000, 0, 0x2000, 0]
  assert sdma.poll_regmem(0x10, 5)[0] == 0xD0000008 and sdma.poll_regmem(0x10, 5)[5] == 0x0FFF0004
  assert sdma.timestamp(0x40)[0] == 0x20D
  assert sdma.fence(0x40, 9) == [5 | (3 << 16), 0x40, 0, 9]
  assert sdma.trap(0x12) == [6, 0x12]
  big = sdma.copy(0x1_0000_0000, 0, (1 << 30) + 5)
  assert len(big) == 14 and big[1] == (1 << 30) - 1 and big[8] == 4
  assert big[10:14] == [1 << 30, 0, 1 << 30, 1]  # second chunk: src 2^30, dst 2^32 + 2^30


def test_decoders_name_packets_and_fields():
  words = pm4.wait_reg_mem(0x1000, 3) + pm4.set_sh_reg(pm4.COMPUTE_PGM_LO, 0x12, 0x34) + pm4.dispatch_direct(4, 2, 1, 0x8005)
  out = pm4.decode(words)
  assert [p[1] for p in out] == ["WAIT_REG_MEM", "SET_SH_REG", "DISPATCH_DIRECT"]
  assert "COMPUTE_PGM_LO=0x12" in out[1][2] and "COMPUTE_PGM_HI=0x34" in out[1][2]
  assert "function=>=" in out[0][2] and "dim_y=2" in out[2][2]
  assert "CS_W32_EN" in out[2][2][3]
  with pytest.raises(ValueError, match="dword 0.*not a PM4 type-3"): pm4.decode([0x80000000])
  with pytest.raises(ValueError, match="needs 7 body dwords"): pm4.decode(pm4.release_mem(0, 0, 1)[:4])
  s = sdma.decode(sdma.copy(0x20, 0x10, 64) + sdma.fence(0x40, 1) + sdma.trap(3))
  assert [p[1] for p in s] == ["COPY_LINEAR", "FENCE", "TRAP"] and "bytes=64" in s[0][2]
  with pytest.raises(ValueError, match="unknown SDMA opcode"): sdma.decode([0xFF])


def test_written_out_register_facts_equal_the_generated_gc_11_0_0_bindings():
  from hcq.autogen.amd import gc_11_0_0 as gc
  for name, off in pm4.GC_REGS.items():
    assert getattr(gc, "reg" + name) == off, name
    assert getattr(gc, "reg" + name + "_BASE_IDX") == 0, name
  assert pm4.INITIATOR_COMPUTE_SHADER_EN == gc.COMPUTE_DISPATCH_INITIATOR__COMPUTE_SHADER_EN_MASK
  assert pm4.INITIATOR_FORCE_START_AT_000 == gc.COMPUTE_DISPATCH_INITIATOR__FORCE_START_AT_000_MASK
  assert pm4.INITIATOR_CS_W32_EN == gc.COMPUTE_DISPATCH_INITIATOR__CS_W32_EN_MASK


def test_written_out_sdma_facts_equal_the_generated_sdma_v6_bindings():
  from hcq.autogen.amd import sdma as h
  for name in ("NOP", "COPY", "WRITE", "INDIRECT", "FENCE", "TRAP", "POLL_REGMEM", "CONST_FILL", "TIMESTAMP", "GCR_REQ"):
    assert getattr(sdma, "OP_" + name) == getattr(h, "SDMA_OP_" + name), name
  assert sdma.SUBOP_COPY_LINEAR == h.SDMA_SUBOP_COPY_LINEAR and sdma.SUBOP_TIMESTAMP_GET_GLOBAL == h.SDMA_SUBOP_TIMESTAMP_GET_GLOBAL
  assert sdma.SUB_OP_SHIFT == h.SDMA_PKT_COPY_LINEAR_HEADER_sub_op_shift == h.SDMA_PKT_TIMESTAMP_GET_GLOBAL_HEADER_sub_op_shift
  assert sdma.FENCE_MTYPE_SHIFT == h.SDMA_PKT_FENCE_HEADER_mtype_shift
  assert sdma.POLL_FUNC_SHIFT == h.SDMA_PKT_POLL_REGMEM_HEADER_func_shift
  assert sdma.POLL_MEM_POLL_SHIFT == h.SDMA_PKT_POLL_REGMEM_HEADER_mem_poll_shift
  assert sdma.POLL_INTERVAL_MASK == h.SDMA_PKT_POLL_REGMEM_DW5_interval_mask
  assert (sdma.POLL_RETRY_SHIFT, sdma.POLL_RETRY_MASK) == (h.SDMA_PKT_POLL_REGMEM_DW5_retry_count_shift,
                                                           h.SDMA_PKT_POLL_REGMEM_DW5_retry_count_mask)
  assert sdma.TRAP_CONTEXT_MASK == h.SDMA_PKT_TRAP_INT_CONTEXT_int_context_mask
  assert sdma.COPY_COUNT_MASK == h.SDMA_PKT_COPY_LINEAR_COUNT_count_mask
  # and the builders agree with the generated field macros
  assert sdma.poll_regmem(0x10, 1, interval=7, retry=0x123)[0::5] == [
    h.SDMA_PKT_POLL_REGMEM_HEADER_OP(8) | h.SDMA_PKT_POLL_REGMEM_HEADER_FUNC(5) | h.SDMA_PKT_POLL_REGMEM_HEADER_MEM_POLL(1),
    h.SDMA_PKT_POLL_REGMEM_DW5_INTERVAL(7) | h.SDMA_PKT_POLL_REGMEM_DW5_RETRY_COUNT(0x123)]


def test_sdma_version_differences_equal_the_generated_bindings():
  """SDMA 4.x (gfx942) has a 22-bit COPY_LINEAR count and no FENCE mtype; SDMA 6 (and 7, which emits 6's packets) a
  30-bit count and mtype."""
  from hcq.autogen.amd import sdma as h6
  from hcq.autogen.amd import sdma_4 as h4
  v4, v6 = sdma.SDMA_VERSIONS[4], sdma.SDMA_VERSIONS[6]
  assert v4.max_copy == h4.SDMA_PKT_COPY_LINEAR_COUNT_count_mask + 1 and not hasattr(h4, "SDMA_PKT_FENCE_HEADER_mtype_shift")
  assert v6.max_copy == h6.SDMA_PKT_COPY_LINEAR_COUNT_count_mask + 1 and v6.fence_mtype and not v4.fence_mtype
  for name in ("COPY", "FENCE", "TRAP", "POLL_REGMEM", "TIMESTAMP", "NOP"):    # the rest hcq sends is the same
    assert getattr(h4, "SDMA_OP_" + name) == getattr(h6, "SDMA_OP_" + name), name
  assert sdma.sdma_version((7, 0, 0)) is v6 and sdma.sdma_version((4, 4, 2)) is v4
  chunks = sdma.copy(0, 1 << 40, (1 << 23) + 3, v4.max_copy)
  assert [w for i, w in enumerate(chunks) if i % 7 == 1] == [(1 << 22) - 1, (1 << 22) - 1, 2]
  assert sdma.fence(0x40, 9, v4.fence_mtype)[0] == 5
