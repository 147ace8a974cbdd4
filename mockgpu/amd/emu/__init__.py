"""Wave emulator of the mock AMD GPU: RDNA3 (gfx1100) and RDNA4 (gfx1200) in wave32, CDNA3 (gfx942) in wave64.

The PM4 DISPATCH_DIRECT handler (and the AQL kernel-dispatch handler) call `dispatch()` with the values of the
COMPUTE_* registers:

    from hcq.mockgpu.amd.emu import GPUMemory, ScratchSetup, dispatch
    mem = GPUMemory()                       # one per device; the KFD model calls mem.add_range(va, size) on map,
    mem.add_range(va, size)                 #   mem.remove_range(va) on unmap/free (GPU VA == host VA)
    stats = dispatch(mem, pgm_addr=PGM_LO<<8 | PGM_HI<<40, rsrc1=..., rsrc2=..., rsrc3=...,
                     user_sgprs=[COMPUTE_USER_DATA_0, ...],     # the first USER_SGPR_COUNT (rsrc2[5:1]) are used
                     grid=(gx, gy, gz),                          # work-groups per dimension (DISPATCH_DIRECT dims)
                     block=(lx, ly, lz),                         # COMPUTE_NUM_THREAD_X/Y/Z
                     lds_bytes=..., scratch=ScratchSetup(base, bytes_per_lane), instruction_budget=...,
                     arch="gfx1100", wave_size=None)     # the code's target; wave_size None: 64 on gfx942, else 32
    stats.waves, stats.wave_instructions, stats.seconds

Target: `arch` picks the decode tables (the ones `hcq disasm` uses) and the architecture's semantics: "gfx1100",
"gfx1200" or "gfx942". `wave_size` is the code object's (kernel descriptor: ENABLE_WAVEFRONT_SIZE32 of
kernel_code_properties on gfx10+; always 64 on gfx9): waves of 64 lanes have 64-bit EXEC/VCC and lane masks in SGPR
pairs. An unknown arch or a wave size the arch cannot run raises GPUFault(kind='invalid dispatch').

Time slices: start() (same arguments) runs a dispatch for at most about engine.SLICE_SECONDS and returns either its
DispatchStats or an engine.SuspendedDispatch, which resume() continues exactly where it stopped (the mock GPU's
queues use it, so that a kernel that runs long, or forever, never holds the host or the GPU's lock for longer).

Errors: hcq.errors.GPUFault (kind 'page fault', with .address) for an access outside every mapping;
InstructionBudgetExceeded (a GPUFault, kind 'instruction budget') when the kernel runs past `instruction_budget`
wave-instructions; GPUFault kind 'illegal instruction' for an encoding the emulator does not know.

Execution model (engine.py, translate.py): each basic block is translated once per code address (and denormal
mode and target) into a Python function over numpy arrays (the translation is re-done when the code bytes change;
translations are shared by every device of the process through blockcache.py, keyed by address, mode and bytes);
all waves of a dispatch (in batches of up to 8192 wave32 or 4096 wave64 waves) run together as arrays of shape
(waves,) for SGPRs and (waves, 32 or 64 lanes) for VGPRs, grouped by program counter (lowest first, so that divergent waves meet again; every 256 blocks the highest,
so that a spinning wave cannot starve another), with EXEC masks for divergence inside a wave and s_barrier
releasing a work-group when its live waves have all reached it. Native blocks (native.py): a block that ends the
waves, in gfx1100 wave32 code made only of the operations native.COVERED lists, runs as C (built with the machine's
C compiler, cached on disk) when its batch has at least native.MIN_WAVES waves; the numpy function stays the
reference and runs everything else (and everything when there is no C compiler). Memory: GPUMemory (memory.py) checks every access
against the mapped ranges before numpy touches host memory; LDS is per work-group, scratch per lane.

Covered (gfx1100, wave32; the same operations on gfx1200 and gfx942 under their own mnemonics and encodings, plus
gfx1200's s_barrier_signal/wait, s_wait_* counters, SMEM sub-dword loads, 64-bit SALU adds and SALU float, and
gfx942's wave64 masks and whole-wave DPP controls, SDWA, packed f32 (v_pk_fma/mul/add/mov), v_fmac_f64,
v_lshl_add_u64, v_mov_b64, unfused v_mac/mad, 16-bit results clearing the high half, AccVGPR moves and memory data,
buffer_wbl2/buffer_inv cache control): SOP1/SOP2/SOPC/SOPK/SOPP, SMEM loads, VOP1/VOP2/VOP3/VOP3SD/VOPC incl.
modifiers and true16 halves, VOP3P (packed 16-bit, fma_mix, dot2), VOPD, DPP16/DPP8, permlane16/x16, DS (loads, stores, 2addr,
atomics, bpermute/permute/swizzle), GLOBAL/SCRATCH/FLAT (FLAT routed by the apertures reported as
src_shared_base/src_private_base to LDS, scratch or global), function calls (s_swappc/s_setpc), f16/f32/f64 with
correctly rounded fma and the descriptor's denormal modes. Not modelled: buffer/image instructions, GDS, traps
(s_trap is a GPUFault), round modes other than nearest-even, gfx942's MFMA/SMFMAC and DPP in VOP3/VOPC forms.
"""
from __future__ import annotations

from typing import NamedTuple

from ....errors import GPUFault
from ...gpumem import GPUMemory, host_view
from .results import DispatchStats, InstructionBudgetExceeded

__all__ = ["GPUMemory", "ScratchSetup", "DispatchStats", "InstructionBudgetExceeded", "dispatch", "start", "host_view",
           "DEFAULT_INSTRUCTION_BUDGET"]

DEFAULT_INSTRUCTION_BUDGET = 200_000_000  # wave-instructions per dispatch


class ScratchSetup(NamedTuple):
  """Private (scratch) memory of a dispatch, per the architected flat scratch of gfx11.

  Lane L of wave W (numbered in dispatch order) owns the `bytes_per_lane` bytes at
  base + (W * lanes + L) * bytes_per_lane (lanes: the wave size, 32 or 64): scratch_* instructions address that lane-private window (offset 0 = its
  start). base=None lets the emulator hold the scratch itself (host memory private to the dispatch). The PM4 model
  derives bytes_per_lane from COMPUTE_TMPRING_SIZE.WAVESIZE (units of 256 bytes per wave on gfx11 -> /32 per lane)
  or the kernel descriptor's private_segment_fixed_size. (A NamedTuple: immutable, and hashed in C, since it is part
  of the key of every dispatch's cached set-up.)"""
  base: int | None = None
  bytes_per_lane: int = 0


_run_dispatch = None
_NO_SCRATCH = ScratchSetup()


def _engine():
  global _run_dispatch
  if _run_dispatch is None:
    from .engine import run_dispatch as _run_dispatch   # numpy-heavy: loaded with the first dispatch
  return _run_dispatch


def dispatch(memory: GPUMemory, *, pgm_addr: int, rsrc1: int, rsrc2: int, rsrc3: int = 0, user_sgprs: list[int],
             grid: tuple[int, int, int], block: tuple[int, int, int], lds_bytes: int = 0,
             scratch: ScratchSetup | None = None, instruction_budget: int = DEFAULT_INSTRUCTION_BUDGET,
             arch: str = "gfx1100", wave_size: int | None = None) -> DispatchStats:
  """Run one compute dispatch to completion. See the module docstring for the arguments and errors."""
  return (_run_dispatch or _engine())(memory, pgm_addr, rsrc1, rsrc2, rsrc3, user_sgprs, tuple(grid), tuple(block),
                                      lds_bytes, scratch or _NO_SCRATCH, instruction_budget, False,
                                      0 if arch == "gfx1100" and wave_size is None else _target(arch, wave_size))


def start(memory: GPUMemory, *, pgm_addr: int, rsrc1: int, rsrc2: int, rsrc3: int = 0, user_sgprs: list[int],
          grid: tuple[int, int, int], block: tuple[int, int, int], lds_bytes: int = 0,
          scratch: ScratchSetup | None = None, instruction_budget: int = DEFAULT_INSTRUCTION_BUDGET,
          arch: str = "gfx1100", wave_size: int | None = None):
  """Start a dispatch and run it for one time slice (engine.SLICE_SECONDS): DispatchStats when it ended within
  it, else an engine.SuspendedDispatch to resume() (slice by slice, with the same results and errors as dispatch())
  or drop(). The arguments are dispatch()'s."""
  bits = 0 if arch == "gfx1100" and wave_size is None else _TARGETS.get((arch, wave_size))
  if bits is None: bits = _target(arch, wave_size)
  return (_run_dispatch or _engine())(memory, pgm_addr, rsrc1, rsrc2, rsrc3, user_sgprs, tuple(grid), tuple(block),
                                      lds_bytes, scratch or _NO_SCRATCH, instruction_budget, True, bits)


def starter(arch: str, wave_size: int):
  """(run, bits) for a caller that starts dispatches of one target over and over (the mock GPU's DISPATCH_DIRECT):
  run(memory, pgm_addr, rsrc1, rsrc2, rsrc3, user_sgprs, grid, block, lds_bytes, scratch, instruction_budget, True,
  bits) is start() with the same arguments given positionally (grid and block as tuples, scratch a ScratchSetup), without
  start()'s keyword call and target look-up. GPUFault(kind='invalid dispatch') for a target the emulator lacks."""
  return _run_dispatch or _engine(), _target(arch, wave_size)


_TARGETS: dict = {}


def _target(arch: str, wave_size: int | None) -> int:
  """The translation-key bits of (arch, wave_size) (translate.target_bits), checked once per pair."""
  bits = _TARGETS.get((arch, wave_size))
  if bits is None:
    from .translate import target_bits
    try: bits = target_bits(arch, wave_size)
    except ValueError as e: raise GPUFault(str(e), kind="invalid dispatch") from None
    _TARGETS[(arch, wave_size)] = bits
  return bits
