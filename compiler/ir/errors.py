"""Errors of the compiler: each names the UOp it is about."""
from __future__ import annotations


class CompileError(Exception):
  """An error in a UOp graph; .uop is the UOp it is about (when there is one)."""
  def __init__(self, msg: str, uop=None):
    super().__init__(msg)
    self.uop = uop


class UOpTypeError(CompileError, TypeError):
  """An ill-typed UOp: the operands' types do not meet, or the op does not apply to them."""


def short(u, limit: int = 400) -> str:
  """repr(u), cut to limit characters: for error messages."""
  text = repr(u)
  return text if len(text) <= limit else text[:limit] + " ...)"
