"""The mock Adreno's shader core: an ir3 emulator for the compute programs a CP_EXEC_CS dispatches.

Instructions are decoded once (hcq.compiler.isa.ir3.isa.ISA.decode: the bitset and its fields, Mesa's isaspec)
and turned into Python closures over numpy arrays: every fiber of a batch (whole work-groups, up to BATCH fibers) runs
together, one array element per fiber, the way mockgpu/amd runs the lanes of a wave.

The machine modelled (a6xx):
  - registers: one file of 64 x vec4 32-bit registers per fiber (r0.x = regid 0 ... r63.w = 255); half registers are
    merged into it (a6xx MERGEDREGS: hrN.c is half (regid & 1) of full regid >> 1: hr0.x, hr0.y = the low and high
    halves of r0.x); a0.x/a1.x (r61.x/y, 16-bit) and p0.x..w (r62, predicates) are their own registers;
  - control: each fiber has its own pc; the lowest pc among the live fibers runs next (fibers that branched ahead
    wait, so divergent paths reconverge where the program's join points are); br/jump/brao/braa/bany/ball relative
    to the branch, getone/shps/shpe (the preamble runs once per dispatch, by one fiber), end;
  - (rptN) repeats an instruction N more times with the destination and the (r) sources stepped by one component;
    (ss), (sy) and the delay slots are checked as Mesa's ir3_legalize requires them (sync.py): a result read before
    its flag or its cycles faults (strict mode) or reads as POISON; (jp), (ul) are not modelled;
  - the dispatch's state as CP_EXEC_CS programmed it: constants past CONSTLEN, registers past FULLREGFOOTPRINT and
    IBO slots past NIBO fault; shared memory is SHARED_SIZE's, private memory MEMSIZEPERITEM's; getone/bany/ball
    act per wave of 64 or 128 fibers (THREADSIZE);
  - ALU: cat1 mov/cov (conversions between f16/f32/u8..s32, with the rounding field for float -> integer: truncate,
    even, +inf, -inf), relative mov through a0.x, mova; cat2 float/integer/bit operations with (abs)/(neg) modifiers
    (a bit-op's (neg) is a not), float immediates from the lookup table, (sat), half precision when the encoding says
    so, compares into registers or p0; cat3 mad/sel; cat4 rcp/rsq/log2/exp2/sin/cos/sqrt;
  - memory: ldg/stg (64-bit addresses; .a forms address src1 + (src2 << shift) + (off << 2)), ldib/stib and
    atomic.b.* through IBO descriptors (CP_LOAD_STATE6 ST6_IBO: the base address in dwords 4-5; an element past the
    descriptor's count reads 0 and is not written, as the hardware bounds-checks buffers), atomic.g.* on global
    addresses, ldl/stl/ldlw/stlw and atomic.* on the work-group's 32 KiB of local memory, ldp/stp private memory,
    stc to the constant file (c[N] or c[a1.x + N], counted in scalar components, the first live fiber's values),
    resinfo.b (3 components),
    getfiberid/getwid/getspid, bar/fence (a barrier holds by the lowest-pc rule). Offsets of ldg/stg, ldl/stl and
    ldp/stp immediates are bytes; an atomic.b's result replaces its data register (the encoding has no destination).
A global access outside every KGSL memory object raises hcq.GPUFault with the address (the context faults); an
instruction the model does not know (or whose semantics Mesa does not document: sel.f*/sel.s*) raises GPUFault
naming it and its pc. mull.u multiplies the low 16 bits of its sources; madsh.m16 is nir's imadsh_mix16.

Modules, along the sections of the model: values.py (constants, types, raw bits <-> numbers), state.py (global memory,
the fibers' state), operands.py (source operands and modifiers), flow.py (cat0), alu.py (cat1-cat4), memops.py (cat6),
dispatch.py (decoding a program into closures and running a CP_EXEC_CS)."""
from __future__ import annotations

from .dispatch import Dispatch, isa_for

__all__ = ["Dispatch", "isa_for"]
