"""The GC's shader arrays as a driver counts their compute units (Linux gfx_v11_0.c gfx_v11_0_get_cu_info): it selects
one shader engine and shader array through GRBM_GFX_INDEX (SE_INDEX, SA_INDEX: gfx_v11_0_select_se_sh), then reads
which of the array's WGPs (two CUs each) are off: CC_GC_SHADER_ARRAY_CONFIG.INACTIVE_WGPS, fused at the factory
(read-only), or'd with GC_USER_SHADER_ARRAY_CONFIG.INACTIVE_WGPS, the ones a driver turned off (read/write, one per
array: gfx_v11_0_set_user_wgp_inactive_bitmap_per_sh). A write with SE/SA_BROADCAST_WRITES reaches every array; a
read with a broadcast bit set reads the array of index 0 on that axis (the registers of one array answer).
Register numbers and fields: hcq.autogen.amd.gc_11_0_0 (Linux gc_11_0_0_offset.h / _sh_mask.h).
"""
from __future__ import annotations

from .discovery import GC_HWID

GC = "gc_11_0_0"


class ShaderArrays:
  def __init__(self, gpu, engines: int, arrays_per_engine: int, fused_off: dict[tuple[int, int], int]):
    """engines x arrays_per_engine shader arrays (the discovery table's GC info); fused_off: (shader engine, shader
    array) -> the bit mask of its WGPs fused off (absent: none)."""
    rf = self.regs = gpu.regs
    self.arrays = [(se, sa) for se in range(engines) for sa in range(arrays_per_engine)]
    self.fused_off = dict(fused_off)
    self.user_off: dict[tuple[int, int], int] = {}
    self.index = rf.addr(GC_HWID, GC, "GRBM_GFX_INDEX")
    self.cc = rf.module(GC).REGS["CC_GC_SHADER_ARRAY_CONFIG"]
    self.user = rf.module(GC).REGS["GC_USER_SHADER_ARRAY_CONFIG"]
    rf.hook(rf.addr(GC_HWID, GC, "CC_GC_SHADER_ARRAY_CONFIG"),
            read=lambda: self.cc.encode(INACTIVE_WGPS=self.fused_off.get(self.selected(), 0)),
            write=lambda _v: None)                        # fuses: a write changes nothing the hardware reads back
    rf.hook(rf.addr(GC_HWID, GC, "GC_USER_SHADER_ARRAY_CONFIG"),
            read=lambda: self.user.encode(INACTIVE_WGPS=self.user_off.get(self.selected(), 0)), write=self._user)

  def _select(self) -> dict:
    return self.regs.fields(GC, "GRBM_GFX_INDEX", self.regs.values.get(self.index, 0))

  def selected(self) -> tuple[int, int]:
    f = self._select()
    return (0 if f["SE_BROADCAST_WRITES"] else f["SE_INDEX"], 0 if f["SA_BROADCAST_WRITES"] else f["SA_INDEX"])

  def _user(self, value: int) -> None:
    f, off = self._select(), self.user.decode(value)["INACTIVE_WGPS"]
    for se, sa in self.arrays:
      if (f["SE_BROADCAST_WRITES"] or se == f["SE_INDEX"]) and (f["SA_BROADCAST_WRITES"] or sa == f["SA_INDEX"]):
        self.user_off[(se, sa)] = off
