"""The UOp IR: ops, dtypes, the hash-consed UOp, pattern matching and rewriting, symbolic simplification, spec."""
from .dtypes import AddrSpace, DType, PtrDType, dtypes
from .ops import GroupOp, Ops
from .rewrite import PatternMatcher, RewriteError, UPat, graph_rewrite
from .uop import (AxisType, BufferArg, CompileError, KernelInfo, UOp, UOpTypeError, VarArg, eval_repr,
                  repr_namespace)

__all__ = ["AddrSpace", "DType", "PtrDType", "dtypes", "GroupOp", "Ops", "PatternMatcher", "RewriteError", "UPat",
           "graph_rewrite", "AxisType", "BufferArg", "CompileError", "KernelInfo", "UOp", "UOpTypeError", "VarArg",
           "eval_repr", "repr_namespace"]
