"""hcq's compiler: the UOp IR (ir/), the lowering pipeline (lower/), backends (backend/), queue programs (queue/).

    from hcq.compiler import UOp, dtypes, KernelInfo, compile
    art = compile(sink, "c")      # a CArtifact: C source, parameters, launch dimensions
"""
from .ir import (AddrSpace, AxisType, BufferArg, CompileError, DType, KernelInfo, Ops, PatternMatcher, PtrDType,
                 RewriteError, UOp, UOpTypeError, UPat, VarArg, dtypes, graph_rewrite)


def compile(sink: UOp, target: str = "c"):  # noqa: A001 - the public name of DESIGN.md §5
  """Lower a kernel sink for target and return the target's artefact ("c": CArtifact with the C source,
  "gfx1100": the bytes of an HSA code object, "sm_80" "sm_86" "sm_89" "sm_90" "sm_100": PTX text)."""
  from .lower import lower
  if target == "c":
    from .backend.c import render_c
    return render_c(lower(sink, "c"))
  if target == "gfx1100":
    from .backend.amd.render import compile_sink
    return compile_sink(sink, target)
  from .backend.ptx import ARCHS, compile_ptx
  if target in ARCHS: return compile_ptx(sink, target)
  raise CompileError(f"unknown compile target {target!r} (known: c, gfx1100, {', '.join(ARCHS)})")


__all__ = ["AddrSpace", "AxisType", "BufferArg", "CompileError", "DType", "KernelInfo", "Ops", "PatternMatcher",
           "PtrDType", "RewriteError", "UOp", "UOpTypeError", "UPat", "VarArg", "dtypes", "graph_rewrite", "compile"]
