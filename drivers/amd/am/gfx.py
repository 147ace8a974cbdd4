"""GFX (GC 11.0.0), as Linux gfx_v11_0_hw_init brings it up after PSP's AUTOLOAD_RLC (the RLC boots the GFX firmware
itself; every step below names the Linux function it follows):

1. gfx_v11_0_wait_for_rlc_autoload_complete: RLC_RLCS_BOOTLOAD_STATUS.BOOTLOAD_COMPLETE and CP_STAT == 0 (bounded).
2. gfx_v11_0_config_gfx_rs64 (MEC part): each MEC pipe's program counter, CP_MEC_RS64_PRGRM_CNTR_START(_HI), from the
   MEC firmware header (ucode_start_addr_lo >> 2 | hi << 30; hi >> 2) with the pipe selected through GRBM_GFX_CNTL
   (me 1), then a reset pulse of the pipes (CP_MEC_RS64_CNTL.MEC_PIPEn_RESET 1 then 0).
3. gfx_v11_0_gfxhub_enable: the GC hub's gart_enable and TLB flush, now that GFX is powered (gmc.GMC.enable_gc_hub).
4. gfx_v11_0_init_golden_registers: golden_settings_gc_11_0, TCP_CNTL bit 29 set by read-modify-write (and_mask =
   or_mask = 0x20000000, soc15_program_register_sequence; gc_11_0_0_sh_mask.h names no field of TCP_CNTL).
   gfx_v11_0_constants_init: GRBM_CNTL.READ_TIMEOUT 0xff; SH_MEM_CONFIG for every VMID (64-bit addressing, unaligned,
   INITIAL_INST_PREFETCH 3: DEFAULT_SH_MEM_CONFIG) and SH_MEM_BASES (the LDS and scratch apertures, shared base 1 and
   private base 2: 0x1000'0000'0000'0000 and 0x2000'0000'0000'0000).
   gfx_v11_0_get_cu_info (called from constants_init): the active CUs of each shader array (GFX.cu_info).
5. nbio gc_doorbell_init (nbio.NBIO.gc_doorbell_init): the CP's doorbells routed.
6. gfx_v11_0_rlc_resume (RLC_CNTL.RLC_ENABLE_F32: the RLC was started by the autoload; Linux's PSP path only enables
   it) and gfx_v11_0_cp_compute_enable: CP_MEC_RS64_CNTL with the pipes active, out of reset and MEC_HALT 0.
A VF does none of 2-6 that the host owns: it checks the host's autoload, enables its GC hub and counts its CUs.
Compute queues come after the boot, from the runtime device (AMSession.create_queue: an MQD in memory, mqd.py, and the
HQD loaded from it through GRBM_GFX_CNTL). Not done: KIQ/MES queue mapping (AM loads no MES firmware).
"""
from __future__ import annotations

from .block import IPBlock

MEC_PIPES = 4
SH_MEM_ADDRESS_MODE_64, SH_MEM_ALIGNMENT_MODE_UNALIGNED = 0, 3   # Linux gfx_v11_0.c DEFAULT_SH_MEM_CONFIG
SHARED_BASE, PRIVATE_BASE = 0x1, 0x2           # SH_MEM_BASES: the LDS / scratch apertures' top 16 bits
VMIDS = 16
TCP_CNTL_GOLDEN = 0x20000000                   # gfx_v11_0.c golden_settings_gc_11_0 (and_mask = or_mask)


def mec_program_counter(mec_fw) -> tuple[int, int]:
  """(CP_MEC_RS64_PRGRM_CNTR_START, _HI) from the MEC firmware's gfx_firmware_header_v2_0 (gfx_v11_0_config_gfx_rs64)."""
  lo, hi = mec_fw.fields["ucode_start_addr_lo"], mec_fw.fields["ucode_start_addr_hi"]
  return ((lo >> 2) | (hi << 30)) & 0xFFFFFFFF, hi >> 2


class GFX(IPBlock):
  name = "gfx"

  def sw_init(self) -> None:
    d = self.dev
    if d.vf: return
    gc = "_".join(map(str, d.discovery.version_of("GC")))
    self.mec_pc = mec_program_counter(d.firmware(f"gc_{gc}_mec.bin"))

  def hw_init(self) -> None:
    d, r = self.dev, self.dev.gc_regs
    who = "the host's " if d.vf else ""    # an SR-IOV VF loads nothing: the host's PSP did (virt.py)
    self.wait_autoload(who)
    if d.vf:         # the host configured and started the MEC (config_gfx_rs64 and the un-halt are the PF's)
      d.gmc.enable_gc_hub()
      self.cu_info()   # gfx_v11_0_constants_init runs on a VF too (it skips only GRBM_CNTL)
      d.nbio.gc_doorbell_init()
      return
    self.config_mec()
    d.gmc.enable_gc_hub()
    self.golden_registers()
    self.constants_init()
    self.cu_info()
    d.nbio.gc_doorbell_init()
    self.step("RLC_CNTL.RLC_ENABLE_F32; MEC un-halted (CP_MEC_RS64_CNTL: pipes active, MEC_HALT 0)")
    r.update("RLC_CNTL", RLC_ENABLE_F32=1)
    self.compute_enable()

  def wait_autoload(self, who: str = "") -> None:
    """gfx_v11_0_wait_for_rlc_autoload_complete: BOOTLOAD_COMPLETE and CP_STAT == 0, in one bounded poll."""
    r = self.dev.gc_regs
    self.step(f"wait for {who}RLC autoload (RLC_RLCS_BOOTLOAD_STATUS.BOOTLOAD_COMPLETE, CP_STAT == 0)")
    done = r.mask("RLC_RLCS_BOOTLOAD_STATUS", "BOOTLOAD_COMPLETE")
    status, cp_stat = r.addr("RLC_RLCS_BOOTLOAD_STATUS"), r.addr("CP_STAT")
    acc = r.access
    acc.poll(lambda: int(acc.read(status) & done == done and acc.read(cp_stat) == 0), 1, 1,
             "GC RLC_RLCS_BOOTLOAD_STATUS.BOOTLOAD_COMPLETE and CP_STAT == 0")
    self.step(f"{who}RLC autoload complete: GFX firmware running")

  def config_mec(self) -> None:
    """gfx_v11_0_config_gfx_rs64, its MEC part: each pipe's start address, then the pipes' reset pulse."""
    r = self.dev.gc_regs
    lo, hi = self.mec_pc
    self.step(f"MEC start address {((hi << 32) | lo) << 2:#x} (gc mec firmware header) for {MEC_PIPES} pipes; pipe reset pulse")
    try:
      for pipe in range(MEC_PIPES):
        r.write("GRBM_GFX_CNTL", MEID=1, PIPEID=pipe)
        r.write("CP_MEC_RS64_PRGRM_CNTR_START", lo)
        r.write("CP_MEC_RS64_PRGRM_CNTR_START_HI", hi)
    finally: r.write("GRBM_GFX_CNTL", 0)
    r.update("CP_MEC_RS64_CNTL", **{f"MEC_PIPE{p}_RESET": 1 for p in range(MEC_PIPES)})
    r.update("CP_MEC_RS64_CNTL", **{f"MEC_PIPE{p}_RESET": 0 for p in range(MEC_PIPES)})

  def golden_registers(self) -> None:
    """gfx_v11_0_init_golden_registers (every GC 11 part; a VF skips it, the host did): golden_settings_gc_11_0's one
    entry, SOC15_REG_GOLDEN_VALUE(GC, 0, regTCP_CNTL, 0x20000000, 0x20000000): bit 29 set, the rest kept."""
    r = self.dev.gc_regs
    self.step(f"golden registers: TCP_CNTL |= {TCP_CNTL_GOLDEN:#x}")
    r.write("TCP_CNTL", r.read("TCP_CNTL") | TCP_CNTL_GOLDEN)

  def constants_init(self) -> None:
    """gfx_v11_0_constants_init (and init_compute_vmid's apertures): GRBM_CNTL, SH_MEM_CONFIG/BASES per VMID."""
    r = self.dev.gc_regs
    self.step(f"GRBM_CNTL.READ_TIMEOUT; SH_MEM_CONFIG and SH_MEM_BASES for {VMIDS} VMIDs")
    r.update("GRBM_CNTL", READ_TIMEOUT=0xFF)
    try:
      for vmid in range(VMIDS):
        r.write("GRBM_GFX_CNTL", VMID=vmid)
        r.write("SH_MEM_CONFIG", ADDRESS_MODE=SH_MEM_ADDRESS_MODE_64, ALIGNMENT_MODE=SH_MEM_ALIGNMENT_MODE_UNALIGNED,
                INITIAL_INST_PREFETCH=3)
        r.write("SH_MEM_BASES", SHARED_BASE=SHARED_BASE, PRIVATE_BASE=PRIVATE_BASE)
    finally: r.write("GRBM_GFX_CNTL", 0)

  def cu_info(self) -> None:
    """gfx_v11_0_get_cu_info: each shader array selected through GRBM_GFX_INDEX (gfx_v11_0_select_se_sh: SE_INDEX,
    SA_INDEX, instance broadcast), its WGPs neither fused off (CC_GC_SHADER_ARRAY_CONFIG.INACTIVE_WGPS) nor turned off
    by a driver (GC_USER_SHADER_ARRAY_CONFIG.INACTIVE_WGPS) counted among the discovery table's WGPs per array, two
    CUs each (gfx_v11_0_get_wgp_active_bitmap_per_sh, _get_cu_active_bitmap_per_sh); then broadcast again. Not done:
    the per-array disable of CC_GC_SA_UNIT_DISABLE (gfx_v11_0_get_sa_active_bitmap) and the amdgpu.disable_cu option.
    Sets active_cus (what the runtime device reports: AMSession.props simd_count) and active_wgps {(se, sa): mask}."""
    d, r = self.dev, self.dev.gc_regs
    gc = d.discovery.gc_info
    engines, arrays = gc.get("gc_num_se", 1), gc.get("gc_num_sa_per_se", 1)
    wgps = gc.get("gc_num_wgp0_per_sa", 0) + gc.get("gc_num_wgp1_per_sa", 0)
    self.active_wgps = {}
    try:
      for se in range(engines):
        for sa in range(arrays):
          r.write("GRBM_GFX_INDEX", SE_INDEX=se, SA_INDEX=sa, INSTANCE_BROADCAST_WRITES=1)
          off = r.field("CC_GC_SHADER_ARRAY_CONFIG", "INACTIVE_WGPS") | \
            r.field("GC_USER_SHADER_ARRAY_CONFIG", "INACTIVE_WGPS")
          self.active_wgps[(se, sa)] = ~off & ((1 << wgps) - 1)
    finally: r.write("GRBM_GFX_INDEX", SE_BROADCAST_WRITES=1, SA_BROADCAST_WRITES=1, INSTANCE_BROADCAST_WRITES=1)
    self.active_cus = 2 * sum(bin(m).count("1") for m in self.active_wgps.values())
    self.step(f"CU info: {self.active_cus} active CUs of {2 * wgps * engines * arrays} ({engines} SEs x {arrays} "
              f"SAs x {wgps} WGPs; CC_/GC_USER_SHADER_ARRAY_CONFIG.INACTIVE_WGPS per array through GRBM_GFX_INDEX)")

  def compute_enable(self) -> None:
    """gfx_v11_0_cp_compute_enable(true): icache valid, every pipe out of reset and active, MEC_HALT 0."""
    self.dev.gc_regs.update("CP_MEC_RS64_CNTL", MEC_INVALIDATE_ICACHE=0, MEC_HALT=0,
                            **{f"MEC_PIPE{p}_RESET": 0 for p in range(MEC_PIPES)},
                            **{f"MEC_PIPE{p}_ACTIVE": 1 for p in range(MEC_PIPES)})
