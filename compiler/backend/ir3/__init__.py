"""ir3 backend (Adreno a6xx): a kernel sink -> IR3Program (machine words and the dispatch metadata drivers/qcom
programs from it).

    from hcq.compiler.backend.ir3 import compile_ir3
    prog = compile_ir3(sink)            # IR3Program: code (64-bit words), lines (their text), args, local size, ...

  isel.py      instruction selection and register allocation on the LINEAR form
  legalize.py  sync flags ((ss)/(sy)/(jp)) and delay slots, Mesa 25's ir3_legalize rules
  emit.py      labels -> branch offsets; lines -> words through compiler/isa/ir3's assembler (which checks each word
               against our disassembler)
The ISA toolkit itself (decoder, disassembler, assembler) is compiler/isa/ir3.

Speed (issue #30; bench/compile.py --targets a630): the selector's first walk also finds the live ranges of a
loop-free kernel, and the linear scan keeps its free registers as the bits of an int (the heap-based scan only when
something spills); per element the selector does dictionary lookups and one formatted line (register names from a
table, a binary ALU element's instruction from a plan memoized per types), legalize is one pass over local state
(an ALU instruction with nothing asynchronous pending on a short path), and a line is encoded from the per-process
line cache or, new, from its shape's template with the shape and values the selector built (no text parsing), labels
resolved in the same pass. Every pass is linear in the program. tests/qcom/test_ir3_words.py pins the emitted words of a corpus (the speed work keeps them identical)."""
from __future__ import annotations

from dataclasses import dataclass, field

from ...lower.target import Target
from ...ir.ops import GroupOp, Ops

# a6xx is what hcq dispatches; for a7xx (a730, a740) the words come from Mesa's isaspec description of generation 7,
# whose encodings of the instructions this backend uses are a6xx's (the a7xx dispatch itself is refused by
# drivers/qcom)
ARCHS = {"a630": 630, "a730": 730, "a740": 740}
# a6xx compute: 1024 work-items per group (Mesa freedreno_devices.py / ir3_compiler.c max_variable_workgroup_size),
# 32 KiB of shared memory (a6xx.xml SP_CS_CTRL_REG1 SHARED_SIZE); no native MAX/MULACC (lowered to compare+select and
# mul+add, as the C reference computes them)
IR3_TARGET = Target("ir3", max_local_threads=1024, local_memory_bytes=32 * 1024,
                    native_ops=frozenset(GroupOp.ALU - {Ops.FLOORDIV, Ops.FLOORMOD, Ops.MAX, Ops.MULACC}),
                    shifts_for_pow2=True)


@dataclass
class IR3Program:
  name: str
  gpu_id: int
  code: bytes
  lines: list = field(repr=False)
  args: list                   # by slot: ("buffer", slot, ibo slot, dtype) / ("int", slot, constant component, dtype)
  global_size: tuple
  local_size: tuple
  localmem: int                # bytes of shared memory
  full_regs: int               # full registers the program names (r0 .. r(full_regs - 1))
  branchstack: int             # the deepest nesting of branches (SP_CS_CTRL_REG0.BRANCHSTACK)
  pvtmem: int = 0              # bytes of private memory per fiber (ldp/stp: dynamically indexed arrays, spills)
  invocation_id: int = 0       # regid of the local id (r0.x)
  wgid: int = 48 * 4           # regid of the work-group id (r48.x)


def compile_ir3(sink, gpu_id: int = 630) -> IR3Program:
  from ...ir import CompileError
  from ...ir import Ops as _Ops
  if gpu_id // 100 not in (6, 7): raise CompileError(f"ir3 backend: gpu id {gpu_id} is not an Adreno 6xx or 7xx")
  from ...lower import lower
  from .emit import assemble
  from .isel import Selector
  from .legalize import legalize
  lin = sink if sink.op is _Ops.LINEAR else lower(sink, IR3_TARGET)
  sel = Selector(lin)
  prog = legalize(sel.run())
  lines, code = assemble(prog, gpu_id)
  info = lin.arg
  return IR3Program(info.name, gpu_id, code, lines, sel.args, tuple(info.global_size),
                    tuple(info.local_size), sel.localmem, sel.full_regs, sel.max_depth, sel.pvtmem)


__all__ = ["ARCHS", "IR3_TARGET", "IR3Program", "compile_ir3"]
