"""Cross-lane operations for translated blocks: DPP16/DPP8, v_permlane16/x16, ds_bpermute/ds_permute/ds_swizzle
(RDNA3 ISA "Data Parallel Processing" and the DS cross-lane instructions; for wave64 also the gfx9 whole-wave DPP
controls of the MI300 ISA "DPP"). Values are (n, L) arrays, L = 32 or 64 lanes; the lane count comes from them."""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from ....errors import GPUFault

u8, u16, u32, u64 = np.uint8, np.uint16, np.uint32, np.uint64
i8, i16, i32, i64 = np.int8, np.int16, np.int32, np.int64
f16, f32, f64 = np.float16, np.float32, np.float64


# ---- cross-lane (DPP16 / DPP8 / permlane; RDNA3 ISA "Data Parallel Processing") ----
@lru_cache(maxsize=None)
def _dpp16_source(ctrl: int, lanes: int = 32, gfx9: bool = False):
  """Source lane of each lane for a DPP control, -1 where there is none (out of the row / wave)."""
  lane = np.arange(lanes)
  row, in_row = lane // 16, lane % 16
  n = ctrl & 0xF
  if ctrl <= 0xFF:                                                            # quad_perm
    src = (lane & ~3) + np.array([(ctrl >> (2 * (i % 4))) & 3 for i in range(lanes)])
  elif 0x101 <= ctrl <= 0x10F: s = in_row + n; src = np.where(s < 16, row * 16 + s, -1)       # row_shl
  elif 0x111 <= ctrl <= 0x11F: s = in_row - n; src = np.where(s >= 0, row * 16 + s, -1)       # row_shr
  elif 0x121 <= ctrl <= 0x12F: src = row * 16 + (in_row - n) % 16                             # row_ror
  elif ctrl == 0x140: src = row * 16 + 15 - in_row                                            # row_mirror
  elif ctrl == 0x141: src = row * 16 + (in_row & ~7) + 7 - (in_row & 7)                       # row_half_mirror
  elif gfx9 and ctrl in (0x130, 0x134, 0x138, 0x13C):
    # MI300 ISA DPP_CTRL wave_shl1 / wave_rol1 / wave_shr1 / wave_ror1: by one lane across the whole wave
    step = 1 if ctrl in (0x130, 0x134) else -1
    src = lane + step
    src = src % lanes if ctrl in (0x134, 0x13C) else np.where((src >= 0) & (src < lanes), src, -1)
  elif gfx9 and ctrl == 0x142: src = np.where(row > 0, row * 16 - 1, -1)     # row_bcast:15: lane 15 of the row before
  elif gfx9 and ctrl == 0x143: src = np.where(lane >= 32, 31, -1)            # row_bcast:31: lane 31 to rows 2 and 3
  elif not gfx9 and 0x150 <= ctrl <= 0x15F: src = row * 16 + n                                # row_share
  elif not gfx9 and 0x160 <= ctrl <= 0x16F: src = row * 16 + (in_row ^ n)                     # row_xmask
  else: raise GPUFault(f"DPP control {ctrl:#x} is not valid on {'gfx9' if gfx9 else 'gfx11'}", kind="illegal instruction")
  src = np.asarray(src)
  src.flags.writeable = False
  return src


def _gather_lanes(x, src, active, fi: int, bc: int, n: int):
  lanes = src.shape[-1]
  x = np.broadcast_to(x, (n, lanes))
  ok = np.broadcast_to(src >= 0, (n, lanes))
  idx = np.clip(src, 0, lanes - 1)
  vals = x[:, idx] if idx.ndim == 1 else np.take_along_axis(x, idx, axis=1)
  if not fi and active is not None:
    ok = ok & (active[:, idx] if idx.ndim == 1 else np.take_along_axis(active, idx, axis=1))
  vals = np.where(ok, vals, u32(0))
  write = ok | bool(bc)
  return vals, np.broadcast_to(write, (n, lanes))


def dpp16(x, ctrl, bc, fi, row_mask, bank_mask, em, ef, gfx9=False):
  n, lanes = np.shape(x)
  vals, write = _gather_lanes(x, _dpp16_source(ctrl, lanes, gfx9), None if ef else em, fi, bc, n)
  lane = np.arange(lanes)
  lane_ok = (((row_mask >> (lane // 16)) & 1) & ((bank_mask >> ((lane % 16) // 4)) & 1)).astype(bool)
  return vals, write & lane_ok


def dpp8(x, lane_sel, fi, em, ef):
  n, lanes = np.shape(x)
  lane = np.arange(lanes)
  src = (lane & ~7) + np.array([(lane_sel >> (3 * (i % 8))) & 7 for i in range(lanes)])
  return _gather_lanes(x, src, None if ef else em, fi, 0, n)


def permlane16(x, s1, s2, cross: bool, fi: int, bc: int, em, ef, n: int):
  """V_PERMLANE16_B32 / V_PERMLANEX16_B32: lane i of a row reads lane sel(i) of the same (x: the other of its pair
  of rows) row, the 4-bit selectors coming from s1 (lanes 0-7) and s2 (lanes 8-15)."""
  lanes = np.shape(x)[-1] if np.ndim(x) == 2 else 32
  lane = np.arange(lanes)
  s1 = np.broadcast_to(np.asarray(s1, u32), (n,)).astype(np.int64)
  s2 = np.broadcast_to(np.asarray(s2, u32), (n,)).astype(np.int64)
  i = (lane % 16)[None, :]
  sel = np.where(i < 8, (s1[:, None] >> (4 * i)) & 15, (s2[:, None] >> (4 * (i - 8))) & 15)
  row = (lane // 16) ^ 1 if cross else lane // 16
  src = row[None, :] * 16 + sel
  return _gather_lanes(x, src, None if ef else em, fi, bc, n)


def permute(data, addr, backward: bool, em, ef):
  """DS_BPERMUTE_B32 (lane l reads lane addr[l]/4) and DS_PERMUTE_B32 (lane l writes lane addr[l]/4); lanes are
  taken modulo the wave size; an inactive source lane reads as 0. Returns (values, lanes to write)."""
  data = np.asarray(data, u32)
  n, lanes = data.shape
  act = np.ones((n, lanes), bool) if ef else em
  lane = ((np.asarray(addr, u32) >> u32(2)) & u32(lanes - 1)).astype(np.intp)
  rows = np.arange(n)[:, None]
  if backward:
    vals = np.where(act[rows, lane], data[rows, lane], u32(0))
    return vals, act
  out = np.zeros((n, lanes), u32)
  # forward: scatter the active lanes in lane order (a later lane wins a collision)
  for l in range(lanes):
    sel = act[:, l]
    out[np.nonzero(sel)[0], lane[sel, l]] = data[sel, l]
  return out, act


def swizzle(data, offset: int, em, ef):
  """DS_SWIZZLE_B32: offset[15] = 1: quad permute (2 bits per lane of the quad); else bit-mask mode with
  and_mask = offset[4:0], or_mask = offset[9:5], xor_mask = offset[14:10] on the lane id within each 32 lanes."""
  n, lanes = np.shape(data)
  lane = np.arange(lanes)
  if offset & 0x8000:
    if offset >= 0xE000: raise GPUFault(f"ds_swizzle_b32 offset {offset:#x} (FFT/rotate modes) is not supported",
                                        kind="illegal instruction")
    src = (lane & ~3) + np.array([(offset >> (2 * (i % 4))) & 3 for i in range(lanes)])
  else:
    src = (lane & ~31) + ((((lane & 31) & (offset & 31)) | ((offset >> 5) & 31)) ^ ((offset >> 10) & 31))
  return _gather_lanes(data, src, None if ef else em, 0, 1, n)
