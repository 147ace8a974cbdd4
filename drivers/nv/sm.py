"""What the SM needs of a launch beyond the QMD's layout: the shared memory reserve and carve-outs, the local memory
reserve of the SASS ABI, the register file, the constant bank 0 words SASS reads for %ntid/%nctaid.

Sources:
- CUDA C++ Programming Guide (12.x), "Compute Capabilities", sections 8.x/9.0/10.0/12.0 "Shared Memory": the
  shared memory capacity per SM can be set to 0, 8, 16, 32, 64, 100, 132, 164, (196, 228) KB; "the 1 KB of shared
  memory not made available to a thread block is reserved for system use" (sm_80 and later), which the hardware
  places at the start of each CTA's shared memory: SHARED_MEMORY_SIZE counts it (round_up(0x400 + static +
  dynamic, 128); tinygrad 0.14's ops_nv.py does the same on hardware: shmem_usage = round_up(0x400 + size, 128)).
- The same guide's "Technical Specifications" table: 64 K 32-bit registers per SM and per thread block; registers
  are allocated per warp in units of 256 (CUDA occupancy calculator: register allocation unit size 256, warp
  allocation granularity 4).
- Local memory: SASS keeps the thread's stack in the high local window and grows it down from c[0][0x28] (0xfffdc0 =
  16 MiB - 0x240), so the window needs the kernel's stack plus 0x240 bytes (tinygrad 0.14 ops_nv.py: lcmem_usage =
  MIN_STACK_SIZE + 0x240, the QMD's SHADER_LOCAL_MEMORY_HIGH_SIZE).
- %ntid and %nctaid: SASS reads blockDim at c[0][0x0..0xc) and gridDim at c[0][0xc..0x18) (cuobjdump of any nvcc
  kernel reading blockDim.x: `MOV R1, c[0x0][0x0]`; the driver words follow at c[0][0x18])."""
from __future__ import annotations

SHARED_RESERVE = 0x400          # bytes at the start of each CTA's shared memory the hardware keeps (sm_80+)
LOCAL_RESERVE = 0x240           # bytes above the stack's top in the high local window (0x1000000 - 0xfffdc0)
CB0_DIMS_END = 0x18             # c[0][0x0..0x18): ntid.xyz, nctaid.xyz (u32 each)
REGISTERS_PER_SM = 64 * 1024
MAX_LOCAL_PER_THREAD = 512 << 10   # the guide's "Maximum amount of local memory per thread": 512 KB
# the shared memory carve-outs (KB) an SM may be configured with, per SM version >> 4 (major, minor)
CARVEOUTS_KB = {(8, 0): (0, 8, 16, 32, 64, 100, 132, 164), (8, 6): (0, 8, 16, 32, 64, 100), (8, 7): (0, 8, 16, 32, 64, 100, 132, 164),
                (8, 9): (0, 8, 16, 32, 64, 100), (9, 0): (0, 8, 16, 32, 64, 100, 132, 164, 196, 228),
                (10, 0): (0, 8, 16, 32, 64, 100, 132, 164, 196, 228), (12, 0): (0, 8, 16, 32, 64, 100)}


def round_up(x: int, a: int) -> int: return (x + a - 1) // a * a


def shared_memory_size(user_bytes: int) -> int:
  """The QMD's SHARED_MEMORY_SIZE for a CTA using user_bytes of static + dynamic shared memory."""
  return round_up(SHARED_RESERVE + user_bytes, 128)


def carveouts_kb(sm_version: int) -> tuple:
  """The carve-outs of an SM version (0x900 = sm_90); the nearest older one of the same major for a minor not
  tabled."""
  major, minor = sm_version >> 8, sm_version & 0xFF
  hit = CARVEOUTS_KB.get((major, minor))
  if hit is None: hit = next((v for (M, m), v in sorted(CARVEOUTS_KB.items(), reverse=True) if M == major and m <= minor),
                             CARVEOUTS_KB[(8, 6)])
  return hit


def sm_config(carveouts: tuple, shared_bytes: int) -> int | None:
  """The *_SM_CONFIG_SHARED_MEM_SIZE value of the smallest carve-out holding shared_bytes (KB / 4 + 1, as tinygrad
  0.14 encodes it: bytes // 4096 + 1), None when none does."""
  kb = next((c for c in carveouts if c << 10 >= shared_bytes), None)
  return None if kb is None else kb // 4 + 1


def max_threads_for_registers(registers: int) -> int:
  """The most threads a CTA may have at `registers` a thread: whole warps of round_up(32 * registers, 256)
  registers, in groups of 4 warps, within the SM's 64 K."""
  per_warp = round_up(max(1, registers) * 32, 256)
  return (REGISTERS_PER_SM // per_warp) // 4 * 4 * 32


def sass_version(sm_version: int) -> int:
  """The QMD's SASS_VERSION: major in the high nibble, minor in the low one (0x900 -> 0x90, 0x809 -> 0x89)."""
  return ((sm_version >> 8) << 4) | (sm_version & 0xF)
