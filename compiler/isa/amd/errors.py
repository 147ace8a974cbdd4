"""Errors of the AMD ISA tools: each names the byte offset (or line) where the input went wrong."""
from __future__ import annotations

from ....errors import HCQError


class ISAError(HCQError, ValueError):
  """Base of decode/assemble/code-object errors."""


class DecodeError(ISAError):
  """Machine code that cannot be decoded: truncated, unknown opcode, reserved operand value."""

  def __init__(self, message: str, offset: int):
    self.offset = offset
    super().__init__(f"{message} at byte offset {offset:#x}")


class AssembleError(ISAError):
  """Assembly text or a DSL call that cannot be encoded (unknown mnemonic, operand out of range, ...)."""

  def __init__(self, message: str, line: int | None = None, text: str | None = None):
    self.line, self.text = line, text
    where = f" (line {line}: {text!r})" if line is not None else (f" ({text!r})" if text else "")
    super().__init__(message + where)


class CodeObjectError(ISAError):
  """An AMDGPU ELF code object that is truncated or malformed; names the byte offset of the bad structure."""

  def __init__(self, message: str, offset: int | None = None):
    self.offset = offset
    super().__init__(message + (f" at byte offset {offset:#x}" if offset is not None else ""))
