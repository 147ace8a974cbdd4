"""What the parser builds and the executor runs: a module of kernels, their parameters, variables and instructions."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ....errors import HCQError


SHOWN_CHARS = 160      # of a statement quoted in an error (a statement may be megabytes long)


class PTXError(HCQError):
  """PTX the mock NV GPU cannot parse or run; names the line and its text."""

  def __init__(self, message: str, line: int | None = None, text: str = ""):
    self.line, self.text = line, text
    where = f"line {line}: " if line is not None else ""
    shown = text.strip()
    if len(shown) > SHOWN_CHARS: shown = f"{shown[:SHOWN_CHARS]}... ({len(shown)} characters)"
    if len(message) > 4 * SHOWN_CHARS: message = f"{message[:4 * SHOWN_CHARS]}... ({len(message)} characters)"
    tail = f" ({shown!r})" if text else ""
    super().__init__(f"PTX {where}{message}{tail}")


class Stopped(HCQError):
  """run() was asked to stop (its `stop` callable returned True) before the kernel ended."""


# PTX fundamental types ("Fundamental Types") -> the numpy dtype a register of that type holds. bf16 and the packed
# x2 types are kept as their bits; .b8/.s8/.u8 registers do not exist in PTX, but ld/st/cvt use these types.
DTYPES = {
  "s8": np.int8, "s16": np.int16, "s32": np.int32, "s64": np.int64,
  "u8": np.uint8, "u16": np.uint16, "u32": np.uint32, "u64": np.uint64,
  "b8": np.uint8, "b16": np.uint16, "b32": np.uint32, "b64": np.uint64,
  "f16": np.float16, "bf16": np.uint16, "f32": np.float32, "f64": np.float64,
  "f16x2": np.uint32, "bf16x2": np.uint32, "pred": np.bool_, "b128": np.uint64,
  "u16x2": np.uint32, "s16x2": np.uint32, "tf32": np.uint32,   # packed 16-bit integers (add/sub/min/max); cvt's tf32
}
TYPE_BYTES = {t: (16 if t == "b128" else np.dtype(d).itemsize) for t, d in DTYPES.items()}


@dataclass
class Param:
  """One kernel parameter: name, PTX type ("u64", "f32", "b8" for byte arrays), size in bytes, alignment, offset in
  the parameter block (the CUDA ABI: each at its alignment, in order)."""
  name: str
  ptype: str
  size: int
  align: int
  offset: int


@dataclass
class Variable:
  """A .shared/.local/.global/.const variable: its space, byte size (0 for an .extern .shared array: dynamic shared
  memory), alignment and initial bytes (module-level .global/.const only)."""
  name: str
  space: str
  size: int
  align: int
  init: bytes | None = None
  offset: int = 0            # within the CTA's shared memory / the thread's local memory


@dataclass
class Operand:
  """kind: reg (name), imm (value: int or float), sreg (special register name), sym (a variable/param/label name,
  value = byte offset added), addr (base: Operand or None, value = offset), vec (items: list of Operand),
  pair (p|q destinations: items), sink (_)."""
  kind: str
  name: str = ""
  value: int | float = 0
  items: list = field(default_factory=list)
  base: "Operand | None" = None
  neg: bool = False          # !%p as a source predicate


@dataclass
class Instr:
  op: str                    # the opcode without modifiers ("add", "ld", "setp")
  mods: list                 # the dot-separated modifiers in order ("rn", "f32"; "global", "v4", "u32")
  operands: list
  guard: tuple | None        # (predicate register name, negated) of @p / @!p
  line: int
  text: str

  @property
  def types(self) -> list:
    return [m for m in self.mods if m in DTYPES]


@dataclass
class PTXKernel:
  name: str
  params: list
  param_bytes: int
  registers: dict            # name -> PTX type of its .reg declaration
  variables: dict            # name -> Variable (this kernel's .shared/.local, with the module's .global/.const)
  instrs: list
  labels: dict               # label -> instruction index
  static_shared_bytes: int
  local_bytes_per_thread: int
  dynamic_shared_name: str | None
  module: "PTXModule" = field(repr=False, default=None)
  maxntid: tuple | None = None
  reqntid: tuple | None = None
  _compiled: object = field(repr=False, default=None)
  source_key: tuple | None = field(repr=False, default=None)   # (sha1 of the module's text, name): the parser's


@dataclass
class PTXModule:
  version: str
  target: str
  address_size: int
  kernels: dict
  globals: dict              # name -> Variable (module-level .global/.const)
  shared: dict               # name -> Variable (module-level .shared; size 0: .extern, the dynamic shared memory)
