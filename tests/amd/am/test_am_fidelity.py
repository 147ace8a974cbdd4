"""Issue 26: the AM bring-up as Linux amdgpu 6.12 does it, and a mock Navi 31 that refuses what the hardware would.

Each numbered item of the issue has a mutation test: the driver step is patched back to the mistake (monkeypatch of
the driver's function) and the mock must refuse it with an error naming the register or command. The positive side
(the driver's order and values accepted) is the rest of the AM suite, which boots and runs on the same mock."""
import numpy as np
import pytest

from hcq.autogen.amd import psp_gfx_if as PG
from hcq.drivers.amd.am import gfx as gfxmod
from hcq.drivers.amd.am import gmc as G
from hcq.drivers.amd.am import session as sessionmod
from hcq.drivers.amd.am import nbio as nbiomod
from hcq.drivers.amd.am import psp as pspmod
from hcq.drivers.amd.am.device import AMDev
from hcq.drivers.amd.am.session import open_am
from hcq.drivers.amd.am.psp import PSPError
from hcq.errors import DeviceError, Timeout
from tests.fixtures.opencl.kernels import KERNELS

ADDR = "0000:03:00.0"


def boot(navi, **kw):
  os, _ = navi
  return AMDev(os, ADDR, os.config, **kw)


def vadd(dev):
  """A copy in (SDMA), a kernel (the compute HQD), a copy out: every queue and doorbell of the runtime."""
  a = np.arange(64, dtype=np.float32)
  bufs = [dev.alloc(256) for _ in range(3)]
  dev.copyin(bufs[0], a)
  dev.copyin(bufs[1], a)
  dev.load(KERNELS["vadd"].code_object())(*bufs, global_size=(1,), local_size=(64,), wait=True)
  assert np.array_equal(np.frombuffer(dev.copyout(bufs[2]), np.float32)[:64], 2 * a)


# ---- 1. HDP flush through the remapped register
def test_1_linux_remaps_the_hdp_flush_and_flushes_there(navi):
  _, gpu = navi
  with boot(navi, until="gmc") as d:
    assert gpu.regs.read(gpu.nbio.remap) == nbiomod.MMIO_REG_HOLE_OFFSET
    before = gpu.nbio.hdp_flushes
    d.nbio.hdp_flush()
    assert gpu.nbio.hdp_flushes == before + 1


def test_1_mutation_remap_pointed_at_mmio_byte_0_is_refused(navi, monkeypatch):
  monkeypatch.setattr(nbiomod.NBIO, "remap_hdp", lambda self: self.dev.nbio_regs.write("BIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL", 0))
  with pytest.raises(DeviceError, match=r"BIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL = 0x0: .*BIF_BX_PF0_MM_INDEX"): boot(navi, until="nbio")


def test_1_mutation_flush_written_to_the_remap_register_is_refused(navi, monkeypatch):
  monkeypatch.setattr(nbiomod.NBIO, "hdp_flush", lambda self: self.dev.nbio_regs.write("BIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL", 0))
  with pytest.raises(DeviceError, match="BIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL = 0x0"): boot(navi, until="gmc")


def test_1_mutation_no_flush_before_the_psp_reads_the_staging_buffer(navi_fw, monkeypatch):
  _, gpu = navi_fw
  monkeypatch.setattr(nbiomod.NBIO, "hdp_flush", lambda self: None)
  with pytest.raises(PSPError, match="the PSP bootloader refused the KDB component"): boot(navi_fw)
  assert "no HDP flush" in gpu.psp.refused[0] and "BIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL" in gpu.psp.refused[0]


# ---- 2. page tables hold physical addresses
def test_2_ptes_pdes_and_the_base_are_physical(navi):
  _, gpu = navi
  with boot(navi, until="gmc") as d:
    base = gpu.mmhub.reg("MMVM_CONTEXT0_PAGE_TABLE_BASE_ADDR_LO32") | (gpu.mmhub.reg("MMVM_CONTEXT0_PAGE_TABLE_BASE_ADDR_HI32") << 32)
    assert base & G.ADDR_MASK == d.gmc.pa(d.gmc.root.offset) == gpu.fb_offset + d.gmc.root.offset
    buf = d.vram.alloc(0x1000, "pa test")
    d.gmc.map_vram(G.VM_BASE + 0x200000, buf.offset, 0x1000)
    assert d.gmc.lookup(G.VM_BASE + 0x200000) & G.ADDR_MASK == gpu.fb_offset + buf.offset
    assert gpu.mmhub.translate(G.VM_BASE + 0x200008) == ("vram", buf.offset + 8)


def test_2_mutation_mc_addresses_in_the_page_tables_are_refused(navi, monkeypatch):
  monkeypatch.setattr(G.GMC, "pa", lambda self, offset: self.fb_base + offset)     # MC, as before the fix
  with pytest.raises(DeviceError, match=r"MMVM_CONTEXT0_PAGE_TABLE_BASE_ADDR holds 0x80.*not a physical VRAM address"):
    boot(navi, until="gmc")


# ---- 3. the GC hub waits for GFX power
def test_3_gmc_enables_only_mmhub_and_skips_gc_flushes(navi):
  _, gpu = navi
  with boot(navi, until="ih") as d:
    assert not d.gmc.hubs["GC"].enabled and gpu.gchub.invalidations == [] and gpu.mmhub.invalidations
    d.gmc.flush_tlb()                    # GFX off: the GC hub's flush is skipped (gmc_v11_0_flush_gpu_tlb)
    assert gpu.gchub.invalidations == []


def test_3_mutation_gc_hub_programmed_in_gmc_init_is_refused(navi, monkeypatch):
  def both(self):
    for name in ("MMHUB", "GC"): self._program(name)
    self.flush_tlb()
  monkeypatch.setattr(G.GMC, "hw_init", both)
  with pytest.raises(DeviceError, match=r"GCVM_CONTEXT0_PAGE_TABLE_BASE_ADDR_LO32 written before the RLC autoload"):
    boot(navi, until="gmc")


# ---- 4. hub bring-up: L1 TLB, L2, private invalidation
@pytest.mark.parametrize("step,reg", [("tlb_regs", r"MMMC_VM_MX_L1_TLB_CNTL\.ENABLE_L1_TLB is 0"),
                                      ("cache_regs", r"MMVM_L2_CNTL\.ENABLE_L2_CACHE is 0")])
def test_4_mutation_hub_without_l1_tlb_or_l2_is_refused(navi, monkeypatch, step, reg):
  monkeypatch.setattr(G.Hub, step, lambda self: None)
  with pytest.raises(DeviceError, match=reg): boot(navi, until="gmc")


def test_4_mutation_mmhub_flush_without_the_private_invalidation_is_refused(navi, monkeypatch):
  monkeypatch.setattr(G.Hub, "private_invalidation", lambda self: None)
  with boot(navi, until="gmc") as d:        # the first flush is acknowledged; the next request is refused
    with pytest.raises(DeviceError, match="MMVM_L2_BANK_SELECT_RESERVED_CID2"): d.gmc.flush_tlb()


def test_4_hub_registers_as_linux_programs_them(navi):
  _, gpu = navi
  with boot(navi, until="gmc") as d:
    f = lambda reg, field: gpu.mmhub.field(reg, field)
    assert (f("MMMC_VM_MX_L1_TLB_CNTL", "ENABLE_L1_TLB"), f("MMMC_VM_MX_L1_TLB_CNTL", "SYSTEM_ACCESS_MODE"),
            f("MMMC_VM_MX_L1_TLB_CNTL", "ENABLE_ADVANCED_DRIVER_MODEL"), f("MMVM_L2_CNTL", "ENABLE_L2_CACHE")) == (1, 3, 1, 1)
    assert gpu.mmhub.reg("MMVM_L2_CONTEXT1_IDENTITY_APERTURE_LOW_ADDR_LO32") == 0xFFFFFFFF
    assert gpu.mmhub.reg("MMMC_VM_SYSTEM_APERTURE_DEFAULT_ADDR_LSB") == d.gmc.pa(d.gmc.scratch.offset) >> 12
    assert f("MMVM_L2_PROTECTION_FAULT_CNTL2", "ACTIVE_PAGE_MIGRATION_PTE_READ_RETRY") == 1


# ---- 5. the sOS handover: 20 ms, then C2PMSG_81 changes; C2PMSG_35 is not waited for again
def test_5_mutation_waiting_for_the_bootloader_after_the_sos_times_out_on_c2pmsg_35(navi_fw, monkeypatch):
  def old(self, loaded):
    self.dev.mp0_regs.wait("MP0_SMN_C2PMSG_35", 0x80000000, 0x80000000)
  monkeypatch.setattr(pspmod.PSP, "_sos_handover", old)
  with pytest.raises(Timeout, match="MP0_SMN_C2PMSG_35"): boot(navi_fw, until="psp")


def test_5_mutation_a_second_bootloader_command_after_the_sos_is_refused(navi_fw, monkeypatch):
  def again(self, loaded):
    self.dev.mp0_regs.write("MP0_SMN_C2PMSG_35", 0x20000)
  monkeypatch.setattr(pspmod.PSP, "_sos_handover", again)
  with pytest.raises(DeviceError, match=r"MP0_SMN_C2PMSG_35 = 0x20000 after LOAD_SOSDRV"): boot(navi_fw, until="psp")


# ---- 6. KM ring: 20 ms before the poll; an existing ring destroyed first
def test_6_mutation_ring_poll_without_the_delay_reads_the_stale_ready(navi_fw, monkeypatch):
  monkeypatch.setattr(pspmod, "HANDSHAKE_S", 0)
  with pytest.raises(DeviceError, match=r"MP0_SMN_C2PMSG_67 \(ring write pointer\) written while the PSP has not answered"):
    boot(navi_fw, until="psp")


def test_5_6_the_psp_handshakes_are_delays_the_mock_clock_takes(navi_fw, monkeypatch):
  """The 20 ms of psp_v13_0's handshakes (after LOAD_SOSDRV, after a ring command) go through the OS's delay(): on
  the mock the models' clock moves by them (no sleep), and the mock PSP, reading that clock, answers after them."""
  os, gpu = navi_fw
  delays, sleeps, real = [], [], type(os).delay
  monkeypatch.setattr(type(os), "delay", lambda self, s: delays.append(s) or real(self, s))
  real_sleep = type(os).sleep
  monkeypatch.setattr(type(os), "sleep", lambda self, s: sleeps.append(s) or real_sleep(self, s))
  c0 = os.clock()
  with boot(navi_fw, until="psp"): pass
  assert delays.count(pspmod.HANDSHAKE_S) >= 2 and pspmod.HANDSHAKE_S not in sleeps
  assert os.clock() - c0 >= sum(delays)


def test_6_mutation_ring_created_over_an_existing_one_is_refused(navi_fw, monkeypatch):
  os, gpu = navi_fw
  open_am(os, 0, os.config).close()          # booted and signed: the next open reuses, the old ring still there
  monkeypatch.setattr(pspmod.PSP, "ring_stop", lambda self: None)
  with pytest.raises(DeviceError, match=r"MP0_SMN_C2PMSG_64 = 0x20000 \(create the KM ring\) while a KM ring exists"):
    open_am(os, 0, os.config)


# ---- 7. MP0 13.0.0 load order: TOC, SMU, TMR, the rest
def test_7_linux_order_is_accepted(navi_fw):
  _, gpu = navi_fw
  with boot(navi_fw, until="psp"):
    ids = [c for c, _t in gpu.psp.commands]
    assert ids[:3] == [PG.GFX_CMD_ID_LOAD_TOC, PG.GFX_CMD_ID_LOAD_IP_FW, PG.GFX_CMD_ID_SETUP_TMR]
    assert gpu.psp.commands[1][1] == PG.GFX_FW_TYPE_SMU and ids[-1] == PG.GFX_CMD_ID_AUTOLOAD_RLC


def test_7_mutation_a_gfx_image_before_setup_tmr_is_refused(navi_fw, monkeypatch):
  def early(self):
    self.load_toc()
    self.tmr = self.dev.vram.alloc(pspmod.TMR_ALIGN * 19, "PSP TMR", align=pspmod.TMR_ALIGN)
    for load in self.loads[:2]: self.load_ip_fw(*load)
  monkeypatch.setattr(pspmod.PSP, "_load_firmware", early)
  with pytest.raises(PSPError, match=r"PSP refused LOAD_IP_FW IMU_I .*status 0xffff0006"): boot(navi_fw, until="psp")


# ---- 8. MES types follow Linux
def test_8_mutation_mes_as_rs64_types_is_refused(navi_fw, monkeypatch):
  real = pspmod.ip_firmware
  def with_mes(gc, sdma, smu):
    return real(gc, sdma, smu) + [(f"gc_{gc}_mes.bin", ("mes_ucode_offset_bytes", "mes_ucode_size_bytes", "file"),
                                   PG.GFX_FW_TYPE_RS64_MES)]
  monkeypatch.setattr(pspmod, "ip_firmware", with_mes)
  monkeypatch.setitem(pspmod.IDENTITY, "mes", ("GC", {"mes_firmware_header_v1_0"}))
  _, gpu = navi_fw
  with pytest.raises(PSPError, match=r"PSP refused LOAD_IP_FW RS64_MES from gc_11_0_0_mes.bin"): boot(navi_fw, until="psp")
  assert "not that of any RS64_MES image" in gpu.psp.refused[-1]


def test_8_mes_with_linux_types_is_accepted(navi_fw, monkeypatch):
  real = pspmod.ip_firmware
  def with_mes(gc, sdma, smu):
    return real(gc, sdma, smu) + [(f"gc_{gc}_mes.bin", ("mes_ucode_offset_bytes", "mes_ucode_size_bytes", "file"),
                                   PG.GFX_FW_TYPE_CP_MES)]
  monkeypatch.setattr(pspmod, "ip_firmware", with_mes)
  monkeypatch.setitem(pspmod.IDENTITY, "mes", ("GC", {"mes_firmware_header_v1_0"}))
  _, gpu = navi_fw
  with boot(navi_fw, until="psp"): assert PG.GFX_FW_TYPE_CP_MES in gpu.psp.loaded_fw and gpu.psp.refused == []


# ---- 9. the MEC started from the firmware's PC; constants
def test_9_mec_runs_from_the_firmware_start(navi_fw):
  os, gpu = navi_fw
  dev = open_am(os, 0, os.config)
  try:
    vadd(dev)
    assert gpu.cp.mec_problem(0) is None and gpu.cp.mec_latched[0] == gpu.mec_start >> 2
    f = lambda reg, field: gpu.regs.fields("gc_11_0_0", reg, gpu.regs.values.get(gpu.cp.g(reg), 0))[field]
    assert f("GRBM_CNTL", "READ_TIMEOUT") == 0xFF and f("RLC_CNTL", "RLC_ENABLE_F32") == 1
    assert f("SH_MEM_CONFIG", "ALIGNMENT_MODE") == gfxmod.SH_MEM_ALIGNMENT_MODE_UNALIGNED
  finally: dev.close()


@pytest.mark.parametrize("step,reg", [("compute_enable", r"CP_MEC_RS64_CNTL\.MEC_HALT is 1"),
                                      ("config_mec", r"CP_MEC_RS64_PRGRM_CNTR_START")])
def test_9_mutation_a_queue_on_a_mec_never_started_is_refused(navi_fw, monkeypatch, step, reg):
  os, _ = navi_fw
  monkeypatch.setattr(gfxmod.GFX, step, lambda self: None)
  with pytest.raises(DeviceError, match=reg): open_am(os, 0, os.config)


def test_9_golden_tcp_cntl_as_linux_sets_it(navi_fw):
  """gfx_v11_0_init_golden_registers: TCP_CNTL |= 0x20000000 (golden_settings_gc_11_0), the other bits kept; the
  register comes from the generated gc 11.0.0 module (manifest filter), at gc_11_0_0_offset.h's regTCP_CNTL."""
  from hcq.autogen.amd import gc_11_0_0 as gc
  os, gpu = navi_fw
  assert gc.regTCP_CNTL == 0x19A2 and gc.regTCP_CNTL_BASE_IDX == 1
  addr = gpu.cp.g("TCP_CNTL")
  gpu.regs.poke(addr, 0x5)                            # bits the golden setting must keep
  with boot(navi_fw) as d:
    assert gpu.regs.values[addr] == 0x20000005
    assert any("TCP_CNTL" in what for b, what, _ in d.steps if b == "gfx")


def test_9_mutation_a_queue_without_the_golden_tcp_cntl_is_refused(navi_fw, monkeypatch):
  os, _ = navi_fw
  monkeypatch.setattr(gfxmod.GFX, "golden_registers", lambda self: None)
  with pytest.raises(DeviceError, match="TCP_CNTL 0x0: bit 29 clear"): open_am(os, 0, os.config)


# ---- 10. doorbells routed; SDMA un-halted; pointers reset
@pytest.mark.parametrize("step,reg", [("gc_doorbell_init", "S2A_DOORBELL_ENTRY_0_CTRL"),
                                      ("sdma_doorbell_range", "S2A_DOORBELL_ENTRY_2_CTRL")])
def test_10_mutation_an_unrouted_doorbell_is_dropped(navi_fw, monkeypatch, step, reg):
  os, gpu = navi_fw
  monkeypatch.setattr(nbiomod.NBIO, step, lambda self, *a: None)
  with pytest.raises(DeviceError, match=f"dropped: {reg}"): vadd(open_am(os, 0, os.config))    # the runtime's first doorbell
  assert gpu.dropped_doorbells and reg in gpu.dropped_doorbells[0][2]


def test_10_mutation_a_halted_sdma_drops_its_doorbell(navi_fw, monkeypatch):
  os, _ = navi_fw
  monkeypatch.setattr(sessionmod.AMSession, "_sdma_unhalt", lambda self: None)
  with pytest.raises(DeviceError, match=r"SDMA0_F32_CNTL\.HALT is 1"): vadd(open_am(os, 0, os.config))


def test_10_mutation_a_recreated_sdma_ring_that_keeps_the_old_rptr_is_refused(navi_fw, monkeypatch):
  os, gpu = navi_fw
  dev = open_am(os, 0, os.config)
  vadd(dev)
  dev.close()
  assert gpu.cp.sdma_saved["rptr"] != 0        # the pointers stay where the ring stopped
  monkeypatch.setattr(sessionmod.AMSession, "_sdma_reset_pointers", lambda self: None)
  with pytest.raises(DeviceError, match=r"SDMA0_QUEUE0_RB_CNTL\.RB_ENABLE with SDMA0_QUEUE0_RB_RPTR"): open_am(os, 0, os.config)


# ---- 11. a SMU driver-interface mismatch only warns
def test_11_an_smu_interface_mismatch_warns_and_boots(navi_fw):
  _, gpu = navi_fw
  gpu.smu.driver_if_version += 1
  with boot(navi_fw) as d:
    assert d.stage == "gfx"
    assert any(b == "smu" and s.startswith("warning: SMU driver interface version") for b, s, _ in d.steps)


# ---- also: the RLC autoload wait checks CP_STAT
def test_rlc_autoload_wait_needs_cp_stat_idle(navi_fw, monkeypatch):
  _, gpu = navi_fw
  from hcq.mockgpu.amd.am.discovery import GC_HWID
  real = type(gpu.rlc).autoload
  def busy(self, g):
    real(self, g)
    g.regs.poke(g.regs.addr(GC_HWID, "gc_11_0_0", "CP_STAT"), 0x80000000)    # CP_BUSY
  monkeypatch.setattr(type(gpu.rlc), "autoload", busy)
  with pytest.raises(Timeout, match="BOOTLOAD_COMPLETE and CP_STAT == 0"): boot(navi_fw)


# ---- also: gfx11 interrupt ids and the fault-enable bits; the MQD from the registers' reset values
def test_a_vm_fault_reaches_the_ih_with_soc21_ids(navi):
  from hcq.drivers.amd.am import ih as ihmod
  _, gpu = navi
  with boot(navi, until="ih") as d:
    gpu.rlc.autoload(gpu)
    d.gmc.enable_gc_hub()
    with pytest.raises(Exception): gpu.gchub.translate(G.VM_BASE + 0x5_0000_0000)
    raw = bytes(gpu.vram[d.ih.ring.offset:d.ih.ring.offset + 4])
    assert raw[0] == ihmod.CLIENT_GFX == 0x0A and raw[1] == 0      # SOC21_IH_CLIENTID_GFX, UTCL2_1_0__SRCID__FAULT


def test_also_mutation_contexts_without_fault_interrupts_never_reach_the_ih(navi, monkeypatch):
  _, gpu = navi
  monkeypatch.setattr(G.Hub, "enable_system_domain",
                      lambda self: self.regs.write(f"{self.vm}_CONTEXT0_CNTL", ENABLE_CONTEXT=1, PAGE_TABLE_DEPTH=3))
  with boot(navi, until="ih") as d:
    posted = gpu.ih.posted
    with pytest.raises(Exception): gpu.mmhub.translate(G.VM_BASE + 0x5_0000_0000)
    assert gpu.ih.posted == posted and d.ih.poll() == []        # the fault happened, nobody was told


def test_also_mutation_an_mqd_without_preload_req_is_refused(navi_fw, monkeypatch):
  from hcq.drivers.amd.am import mqd as mqdmod
  os, _ = navi_fw
  monkeypatch.setitem(mqdmod.DEFAULTS, "CP_HQD_PERSISTENT_STATE", 0)
  with pytest.raises(DeviceError, match=r"CP_HQD_PERSISTENT_STATE\.PRELOAD_REQ 0"): open_am(os, 0, os.config)


def test_also_mec_doorbell_range_is_in_bytes(navi_fw):
  os, gpu = navi_fw
  dev = open_am(os, 0, os.config)
  try:
    upper = gpu.regs.values[gpu.cp.g("CP_MEC_DOORBELL_RANGE_UPPER")]
    assert upper == (sessionmod.DOORBELL_SDMA * 2 - 2) << 2 and upper >= sessionmod.DOORBELL_COMPUTE * 8
  finally: dev.close()


# ---- what tinygrad's AM driver needs of the mock (hardware-proven client)
def test_registers_beyond_the_bar_through_the_rsmu_window(navi):
  _, gpu = navi
  from hcq.autogen.amd import nbio_4_3_0 as N
  from hcq.mockgpu.amd.am.discovery import NBIF_HWID
  addr = gpu.regs.addr(NBIF_HWID, "nbio_4_3_0", "S2A_DOORBELL_ENTRY_2_CTRL")
  base = gpu.regs.ips[NBIF_HWID][N.REGS["BIF_BX_PF0_RSMU_INDEX"].base_idx]
  gpu.regs.mmio.write32(base * 4, addr * 4)                     # BIF_BX_PF0_RSMU_INDEX: a byte address
  gpu.regs.mmio.write32((base + 1) * 4, 0x1234)                 # BIF_BX_PF0_RSMU_DATA
  assert gpu.regs.values[addr] == 0x1234 and gpu.regs.mmio.read32((base + 1) * 4) == 0x1234


def test_vmid0_reaches_the_frame_buffer_through_the_system_aperture(navi):
  _, gpu = navi
  with boot(navi, until="ih") as d:
    gpu.rlc.autoload(gpu)
    d.gmc.enable_gc_hub()
    gpu.cp.reach_aperture(gpu.fb_base + 0x3000, 0x800)          # an MQD at an MC address, as tinygrad's
    assert (gpu.fb_base + 0x3000, 0x1000) in gpu.cp.mapped      # MC addresses of VRAM, no page table needed
    gpu.cp.reach_aperture(gpu.fb_base + gpu.vram_size, 0x1000)  # beyond the frame buffer: nothing
    assert not [r for r in gpu.cp.mapped if r[0] == gpu.fb_base + gpu.vram_size]


# ---- also: the mode-1 reset through the PSP waits for the sOS to take the command (psp_v13_0_mode1_reset)
def test_the_psp_fallback_reset_waits_for_the_sos_ready(navi_fw):
  os, gpu = navi_fw
  AMDev(os, ADDR, os.config).close()
  gpu.smu.running = False                # the SMU does not answer: the reset goes through the PSP
  gpu.regs.poke(gpu.psp.r[64], 0)        # a ring command a killed process left unanswered: not ready
  with AMDev(os, ADDR, os.config, until="discovery") as d:
    with pytest.raises(Timeout, match="MP0_SMN_C2PMSG_64"): d.mode1_reset()
  assert gpu.reset.count == 0
  gpu.regs.poke(gpu.psp.r[64], 0x80000000)
  with AMDev(os, ADDR, os.config, until="discovery") as d: d.mode1_reset()
  assert gpu.reset.requests == ["PSP GFX_CTRL_CMD_ID_MODE1_RST"]
