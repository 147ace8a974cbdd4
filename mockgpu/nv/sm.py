"""What the mock NV GPU's SM checks of a launch, from the QMD and constant bank 0, before and while it runs a kernel.

Facts (not the driver's modules; the same public sources the driver cites):
- CUDA C++ Programming Guide 12.x, "Compute Capabilities" (8.x, 9.0: "Shared Memory"): of each CTA's shared memory
  1 KB is "reserved for system use"; the hardware keeps it at the start, so a kernel's static and dynamic shared
  memory lie after 0x400 bytes of the QMD's SHARED_MEMORY_SIZE.
- The same guide's "Technical Specifications": 64 K 32-bit registers per SM and per CTA, at most 255 per thread;
  registers are given per warp in units of 256 (CUDA occupancy calculator: allocation unit 256, warp granularity 4).
- The SASS ABI's stack: it grows down from c[0][0x28] = 0xfffdc0 (16 MiB - 0x240) in the thread's high local memory
  window, so a thread's usable local memory is the QMD's SHADER_LOCAL_MEMORY_HIGH_SIZE less 0x240 bytes (tinygrad
  0.14's ops_nv.py sizes the window as MIN_STACK_SIZE + 0x240 on hardware).
- %ntid and %nctaid: SASS reads blockDim from c[0][0x0..0xc) and gridDim from c[0][0xc..0x18) (cuobjdump of an nvcc
  kernel reading blockDim.x shows c[0x0][0x0]); a constant read past CONSTANT_BUFFER_SIZE returns 0."""
from __future__ import annotations

import struct

SHARED_RESERVE = 0x400
LOCAL_RESERVE = 0x240
REGISTERS_PER_SM = 64 * 1024
MAX_REGISTERS = 255
CB0_DIMS = 0x18


def _round_up(x: int, a: int) -> int: return (x + a - 1) // a * a


# compute class methods (open-gpu-doc classes/compute/clc7c0.h; the same offsets in clc9c0.h, clcbc0.h, clcdc0.h)
SET_SHADER_LOCAL_MEMORY_A, SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_A = 0x790, 0x2E4


def check_local_memory(state: dict, subc: int, high: int, props, mapped) -> None:
  """The local memory behind the windows (SET_SHADER_LOCAL_MEMORY_A/B: its address; _NON_THROTTLED_A/B: bytes per
  TPC) must hold the QMD's high window for every lane of every warp slot of a TPC's SMs, on every TPC; mapped(addr,
  size) says whether GPU memory is there. LaunchRefused names the method and both sizes."""
  get = lambda m: state.get((subc, m), 0)
  base = get(SET_SHADER_LOCAL_MEMORY_A) << 32 | get(SET_SHADER_LOCAL_MEMORY_A + 4)
  per_tpc = get(SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_A) << 32 | get(SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_A + 4)
  need = high * 32 * props.max_warps_per_sm * props.sm_per_tpc
  if per_tpc < need:
    raise LaunchRefused(f"SET_SHADER_LOCAL_MEMORY_NON_THROTTLED gives {per_tpc} bytes a TPC; the QMD's high local "
                        f"window of {high:#x} bytes a thread needs {need} (32 lanes x {props.max_warps_per_sm} warps x "
                        f"{props.sm_per_tpc} SMs)")
  total = per_tpc * props.gpcs * props.tpc_per_gpc
  if not base or not mapped(base, total):
    raise LaunchRefused(f"SET_SHADER_LOCAL_MEMORY_A/B ({base:#x}) is not {total} bytes of mapped GPU memory "
                        f"({per_tpc} bytes for each of {props.gpcs * props.tpc_per_gpc} TPCs)")


class LaunchRefused(Exception):
  """A QMD the SM refuses before any thread runs; the message names the field."""


def check_registers(registers: int, block) -> None:
  threads = block[0] * block[1] * block[2]
  field = "the QMD's REGISTER_COUNT"
  if not 1 <= registers <= MAX_REGISTERS:
    raise LaunchRefused(f"{field} is {registers}: a thread has 1 to {MAX_REGISTERS} registers")
  warps = -(-threads // 32)
  need = _round_up(warps, 4) * _round_up(registers * 32, 256)
  if need > REGISTERS_PER_SM:
    raise LaunchRefused(f"{field} of {registers} for a CTA of {threads} threads needs {need} registers; an SM has "
                        f"{REGISTERS_PER_SM}")


def dims_from_cb0(cb0: bytes) -> tuple[tuple, tuple]:
  """(ntid, nctaid) as SASS reads them from constant bank 0 (zeros past the buffer's size)."""
  raw = (bytes(cb0) + bytes(CB0_DIMS))[:CB0_DIMS]
  v = struct.unpack("<6I", raw)
  return v[:3], v[3:]


def limits(launch: dict, kernel, dynamic_offset: int) -> tuple[dict, int]:
  """The executor's sm dict (shared/local limits with what set them) and the dynamic shared bytes the launch gives
  the kernel (what SHARED_MEMORY_SIZE holds past the reserve and the static arrays)."""
  sms = launch["shared"]
  usable_shared = max(sms - SHARED_RESERVE, 0)
  dynamic = max(usable_shared - dynamic_offset, 0) if kernel.dynamic_shared_name else 0
  high = launch["local_high"]
  usable_local = max(high - LOCAL_RESERVE, 0)
  sm = {"shared_limit": usable_shared, "local_limit": usable_local,
        "shared_why": f" (the QMD's SHARED_MEMORY_SIZE is {sms:#x}, of which the SM reserves the first "
                      f"{SHARED_RESERVE:#x})",
        "local_why": f" (the QMD's high local memory window is {high:#x} bytes a thread, of which the SASS stack "
                     f"keeps the top {LOCAL_RESERVE:#x})"}
  return sm, dynamic
