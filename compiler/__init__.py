"""hcq's compiler: the UOp IR (ir/), the lowering pipeline (lower/), backends (backend/), queue programs (queue/).

    from hcq.compiler import UOp, dtypes, KernelInfo, compile
    art = compile(sink, "c")      # a CArtifact: C source, parameters, launch dimensions
"""
from __future__ import annotations

_IR_NAMES = ("AddrSpace", "AxisType", "BufferArg", "CompileError", "DType", "KernelInfo", "Ops", "PatternMatcher",
             "PtrDType", "RewriteError", "UOp", "UOpTypeError", "UPat", "VarArg", "dtypes", "graph_rewrite")


def __getattr__(name: str):
  """The IR's names, imported on first use (PEP 562): a process that only decodes or loads code objects (the mock
  GPU's emulator, hcq.open of an AMD device) never pays for the IR (issue 33, cold start)."""
  if name in _IR_NAMES:
    from . import ir
    value = getattr(ir, name)
    globals()[name] = value
    return value
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# backend/amd/render.ARCHS (not imported here: it loads the ISA tables)
AMD_TARGETS = ("gfx1100", "gfx1101", "gfx1102", "gfx1200", "gfx942")
IR3_TARGETS = {"a630": 630, "a730": 730, "a740": 740}   # backend/ir3.ARCHS: Adreno gpu ids


def compile(sink: UOp, target: str = "c"):  # noqa: A001 - the public name of DESIGN.md §5
  """Lower a kernel sink for target and return the target's artefact ("c": CArtifact with the C source,
  "gfx1100", "gfx1101", "gfx1102", "gfx1200", "gfx942": the bytes of an HSA code object, "sm_80" "sm_86" "sm_89"
  "sm_90" "sm_100": PTX text,
  "a630", "a730", "a740": an IR3Program, ir3 machine words and their dispatch metadata).
  The cyclic collector is paused throughout, as lower() pauses it: the backends build large acyclic structures
  (machine instructions, INS UOps) whose allocation would otherwise trigger full collections over every live UOp."""
  from .lower import gc_paused
  with gc_paused(): return _compile(sink, target)


def _compile(sink: UOp, target: str):
  from .ir import CompileError, Ops, UOp
  from .lower import lower
  if isinstance(sink, UOp) and sink.op is Ops.PROGRAM and target not in AMD_TARGETS:
    raise CompileError(f"a PROGRAM of hand-written instructions is machine code for its own target "
                       f"({getattr(sink.arg, 'arch', '?')}), it does not compile for {target!r}", sink)
  if target == "c":
    from .backend.c import render_c
    return render_c(lower(sink, "c"))
  if target in AMD_TARGETS:   # a kernel sink, or a PROGRAM of hand-written instructions (backend/amd/program.py)
    from .backend.amd import compile_kernel
    return compile_kernel(sink, target)
  from .backend.ptx import ARCHS, compile_ptx
  if target in ARCHS: return compile_ptx(sink, target)
  if target in IR3_TARGETS:
    from .backend.ir3 import compile_ir3
    return compile_ir3(sink, IR3_TARGETS[target])
  raise CompileError(f"unknown compile target {target!r} (known: c, {', '.join(AMD_TARGETS)}, {', '.join(ARCHS)}, "
                     f"{', '.join(IR3_TARGETS)})")


__all__ = ["AddrSpace", "AxisType", "BufferArg", "CompileError", "DType", "KernelInfo", "Ops", "PatternMatcher",
           "PtrDType", "RewriteError", "UOp", "UOpTypeError", "UPat", "VarArg", "dtypes", "graph_rewrite", "compile"]
