"""Legalized instructions -> 64-bit words through hcq's ir3 assembler (compiler/isa/ir3/asm.py).

Branch targets are resolved here (br/jump take the offset in instructions from the branch: Mesa's ir3 cat0 IMMED,
what the disassembler prints as #N). A line is assembled by Assembler.assemble_line, which only returns a word the
disassembler prints back as exactly that line, or, once its shape (the line without its registers and offsets) is
common, by the shape's template of assembled words (template.py, checked against the assembler when built); words
are cached per line for the process (a kernel repeats its nops, moves and loop code)."""
from __future__ import annotations

import threading

from ...ir import CompileError
from .legalize import Ins

_CACHE: dict[tuple[int, str], int] = {}
_ASM: dict[int, object] = {}
_LOCK = threading.Lock()


def _assembler(gpu_id: int):
  """The gpu's template encoder (compiler/isa/ir3/template.py) over its assembler."""
  a = _ASM.get(gpu_id)
  if a is None:
    from ...isa.ir3.asm import Assembler
    from ...isa.ir3.template import TemplateEncoder
    a = _ASM[gpu_id] = TemplateEncoder(Assembler(gpu_id))
  return a


def assemble_line(line: str, gpu_id: int) -> int:
  key = (gpu_id, line)
  w = _CACHE.get(key)
  if w is None:
    from ...isa.ir3.asm import AsmError
    with _LOCK:                      # the assembler keeps per-call state (its ISA's decode warnings)
      try: w = _assembler(gpu_id).encode(line)
      except AsmError as e: raise CompileError(f"ir3 backend: emitted a line the assembler refuses: {e}") from None
    _CACHE[key] = w
  return w


def resolve(prog: list[Ins]) -> list[str]:
  """The program's lines: labels dropped, branch targets as offsets."""
  at, pc = {}, 0
  for ins in prog:
    if ins.kind == "label": at[ins.text] = pc
    else: pc += 1
  lines, pc = [], 0
  for ins in prog:
    if ins.kind == "label": continue
    text = ins.flags + ins.text
    if ins.target is not None: text = text.replace("#" + ins.target, f"#{at[ins.target] - pc}")
    lines.append(text)
    pc += 1
  return lines


def encode(lines: list[str], gpu_id: int) -> bytes:
  import struct
  return struct.pack(f"<{len(lines)}Q", *(assemble_line(l, gpu_id) for l in lines))
