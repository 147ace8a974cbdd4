"""Legalized instructions -> 64-bit words through hcq's ir3 assembler (compiler/isa/ir3/asm.py).

Branch targets are resolved here (br/jump take the offset in instructions from the branch: Mesa's ir3 cat0 IMMED,
what the disassembler prints as #N). A line is assembled by Assembler.assemble_line, which only returns a word the
disassembler prints back as exactly that line, or, once its shape (the line without its registers and offsets) is
common, by the shape's template of assembled words (template.py, checked against the assembler when built); words
are cached per line for the process (a kernel repeats its nops, moves and loop code). assemble() is resolve and
encode in one pass for the backend: a line not cached yet whose instruction carries its shape and values (Ins.enc,
from the instruction selector) goes to the template encoder without its text being parsed again."""
from __future__ import annotations

import threading

from ...ir import CompileError
from .legalize import Ins

_CACHE: dict[int, dict[str, int]] = {}     # gpu id -> line -> word
CACHE_LINES = 1 << 17     # lines a gpu's cache holds before it starts over (a kernel's distinct immediates would
                          # otherwise grow it for the life of the process: a 20,000-node chain brings 10,000)
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


def _cache(gpu_id: int) -> dict:
  c = _CACHE.get(gpu_id)
  if c is None: c = _CACHE.setdefault(gpu_id, {})
  return c


def assemble_line(line: str, gpu_id: int, enc: tuple | None = None, flags: str = "") -> int:
  """The word of a line; enc: (shape, values) of the line without its leading sync flags `flags`."""
  cache = _cache(gpu_id)
  w = cache.get(line)
  if w is None:
    with _LOCK:                      # the assembler keeps per-call state (its ISA's decode warnings)
      a = _assembler(gpu_id)
      try:
        if enc is None: w = a.encode(line)
        else:
          shape, values = enc
          if flags: shape = (flags + shape[0], *shape[1:])
          w = a.encode_split(line, shape, values)
      except Exception as e:
        from ...isa.ir3.asm import AsmError
        if not isinstance(e, AsmError): raise
        raise CompileError(f"ir3 backend: emitted a line the assembler refuses: {e}") from None
    if len(cache) >= CACHE_LINES: cache.clear()
    cache[line] = w
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


def assemble(prog: list[Ins], gpu_id: int) -> tuple[list[str], bytes]:
  """(resolve(prog), encode(those lines)) in one pass: a branch's line waits for the end of the pass (its label may
  come after it) and is made then."""
  import struct
  at: dict = {}
  lines: list = []
  words: list = []
  branches: list = []                 # (position, instruction) of the branches and jumps
  get = _cache(gpu_id).get
  for ins in prog:
    kind = ins.kind
    if kind == "label":
      at[ins.text] = len(lines)
      continue
    if ins.target is not None:
      branches.append((len(lines), ins))
      lines.append(None)
      words.append(0)
      continue
    flags = ins.flags
    text = flags + ins.text if flags else ins.text
    w = get(text)
    lines.append(text)
    words.append(w if w is not None else assemble_line(text, gpu_id, ins.enc, flags))
  for pc, ins in branches:
    flags = ins.flags
    text = (flags + ins.text if flags else ins.text).replace("#" + ins.target, f"#{at[ins.target] - pc}")
    w = get(text)
    lines[pc] = text
    words[pc] = w if w is not None else assemble_line(text, gpu_id, None, flags)
  return lines, struct.pack(f"<{len(words)}Q", *words)
