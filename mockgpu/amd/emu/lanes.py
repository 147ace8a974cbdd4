"""Cross-lane operations for translated blocks: DPP16/DPP8, v_permlane16/x16, ds_bpermute/ds_permute/ds_swizzle
(RDNA3 ISA "Data Parallel Processing" and the DS cross-lane instructions)."""
from __future__ import annotations

import numpy as np

from ....errors import GPUFault

u8, u16, u32, u64 = np.uint8, np.uint16, np.uint32, np.uint64
i8, i16, i32, i64 = np.int8, np.int16, np.int32, np.int64
f16, f32, f64 = np.float16, np.float32, np.float64

# ---- cross-lane (DPP16 / DPP8 / permlane; RDNA3 ISA "Data Parallel Processing") ----
_L = np.arange(32)
_ROW, _IN_ROW = _L // 16, _L % 16


def _dpp16_source(ctrl: int):
  """Source lane of each of the 32 lanes for a DPP16 control, -1 where out of the row."""
  if ctrl <= 0xFF:                                           # quad_perm
    sel = np.array([(ctrl >> (2 * (i % 4))) & 3 for i in range(32)])
    return (_L & ~3) + sel
  n = ctrl & 0xF
  if 0x101 <= ctrl <= 0x10F: src = _IN_ROW + n; return np.where(src < 16, _ROW * 16 + src, -1)   # row_shl
  if 0x111 <= ctrl <= 0x11F: src = _IN_ROW - n; return np.where(src >= 0, _ROW * 16 + src, -1)   # row_shr
  if 0x121 <= ctrl <= 0x12F: return _ROW * 16 + (_IN_ROW - n) % 16                              # row_ror
  if ctrl == 0x140: return _ROW * 16 + 15 - _IN_ROW                                             # row_mirror
  if ctrl == 0x141: return _ROW * 16 + (_IN_ROW & ~7) + 7 - (_IN_ROW & 7)                       # row_half_mirror
  if 0x150 <= ctrl <= 0x15F: return _ROW * 16 + n                                               # row_share
  if 0x160 <= ctrl <= 0x16F: return _ROW * 16 + (_IN_ROW ^ n)                                   # row_xmask
  raise GPUFault(f"DPP control {ctrl:#x} is not valid on gfx11", kind="illegal instruction")


def _gather_lanes(x, src, active, fi: int, bc: int, n: int):
  x = np.broadcast_to(x, (n, 32))
  ok = np.broadcast_to(src >= 0, (n, 32))
  idx = np.clip(src, 0, 31)
  vals = x[:, idx] if idx.ndim == 1 else np.take_along_axis(x, idx, axis=1)
  if not fi and active is not None:
    ok = ok & (active[:, idx] if idx.ndim == 1 else np.take_along_axis(active, idx, axis=1))
  vals = np.where(ok, vals, u32(0))
  write = ok | bool(bc)
  return vals, np.broadcast_to(write, (n, 32))


def dpp16(x, ctrl, bc, fi, row_mask, bank_mask, em, ef):
  n = np.shape(x)[0]
  vals, write = _gather_lanes(x, _dpp16_source(ctrl), None if ef else em, fi, bc, n)
  lane_ok = (((row_mask >> _ROW) & 1) & ((bank_mask >> ((_L % 16) // 4)) & 1)).astype(bool)
  return vals, write & lane_ok


def dpp8(x, lane_sel, fi, em, ef):
  n = np.shape(x)[0]
  src = (_L & ~7) + np.array([(lane_sel >> (3 * (i % 8))) & 7 for i in range(32)])
  return _gather_lanes(x, src, None if ef else em, fi, 0, n)


def permlane16(x, s1, s2, cross: bool, fi: int, bc: int, em, ef, n: int):
  """V_PERMLANE16_B32 / V_PERMLANEX16_B32: lane i of a row reads lane sel(i) of the same (x: the other) row, the
  4-bit selectors coming from s1 (lanes 0-7) and s2 (lanes 8-15)."""
  s1 = np.broadcast_to(np.asarray(s1, u32), (n,)).astype(np.int64)
  s2 = np.broadcast_to(np.asarray(s2, u32), (n,)).astype(np.int64)
  i = _IN_ROW[None, :]
  sel = np.where(i < 8, (s1[:, None] >> (4 * i)) & 15, (s2[:, None] >> (4 * (i - 8))) & 15)
  row = (1 - _ROW) if cross else _ROW
  src = row[None, :] * 16 + sel
  return _gather_lanes(x, src, None if ef else em, fi, bc, n)


def permute(data, addr, backward: bool, em, ef):
  """DS_BPERMUTE_B32 (lane l reads lane addr[l]/4) and DS_PERMUTE_B32 (lane l writes lane addr[l]/4); lanes are
  taken modulo 32; an inactive source lane reads as 0. Returns (values, lanes to write)."""
  data = np.asarray(data, u32)
  n = data.shape[0]
  act = np.ones((n, 32), bool) if ef else em
  lane = ((np.asarray(addr, u32) >> u32(2)) & u32(31)).astype(np.intp)
  rows = np.arange(n)[:, None]
  if backward:
    vals = np.where(act[rows, lane], data[rows, lane], u32(0))
    return vals, act
  out = np.zeros((n, 32), u32)
  # forward: scatter the active lanes in lane order (a later lane wins a collision)
  for l in range(32):
    sel = act[:, l]
    out[np.nonzero(sel)[0], lane[sel, l]] = data[sel, l]
  return out, act


def swizzle(data, offset: int, em, ef):
  """DS_SWIZZLE_B32: offset[15] = 1: quad permute (2 bits per lane of the quad); else bit-mask mode with
  and_mask = offset[4:0], or_mask = offset[9:5], xor_mask = offset[14:10] on the lane id within 32 lanes."""
  if offset & 0x8000:
    if offset >= 0xE000: raise GPUFault(f"ds_swizzle_b32 offset {offset:#x} (FFT/rotate modes) is not supported",
                                        kind="illegal instruction")
    src = (_L & ~3) + np.array([(offset >> (2 * (i % 4))) & 3 for i in range(32)])
  else:
    src = ((_L & (offset & 31)) | ((offset >> 5) & 31)) ^ ((offset >> 10) & 31)
  n = np.shape(data)[0]
  return _gather_lanes(data, src, None if ef else em, 0, 1, n)
