"""RDNA3 code as UOps: PROGRAM(LINEAR(INS, ...)), and the one path from a PROGRAM to an HSA code object.

    from hcq.compiler.backend.amd.program import ins, program, code_object
    p = program("copy", [ins("s_load_b128 s[4:7], s[0:1], 0x0"), ..., ins("s_endpgm")],
                args=[Arg(0, 8, "global_buffer", "src"), Arg(8, 8, "global_buffer", "dst")], vgpr_count=2)
    blob = code_object(p)         # bytes of an HSA code object (cowriter.write_code_object)
    dev.compile(p)                # AMD / MOCK+AMD: a PROGRAM loads like a compiled kernel (backend.amd.compile_kernel)
    program("copy", a, args=...)  # the same PROGRAM from the instructions of an Asm DSL builder a

  INS      arg (instruction, dtypes.void), no sources: one instruction in LLVM syntax ("v_add_f32 v2, v2, v3"), a
           label ("loop:", a branch target of the instructions around it), or one encoded instruction (bytes)
  LINEAR   src (INS, ...): the instructions in order (unlike a lowered kernel's LINEAR an element may repeat: two
           `s_nop 0` are one UOp)
  PROGRAM  src (LINEAR,), arg KernelMeta: the kernel's name and arguments, what its descriptor and metadata say
           (cowriter.KernelSpec's fields: register counts, entry state, segment sizes, ...) and the target

Compiled kernels take this path as well: render.compiled_program turns a compiled kernel into its PROGRAM (one
encoded INS per instruction) and render.code_object writes it with code_object, so hand-written and compiled kernels
have one writer.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ...ir import CompileError, Ops, UOp, dtypes
from ...isa.amd.asm import Asm, Assembler
from ...isa.amd.cowriter import Arg, KernelSpec, write_code_object
from ...isa.amd.errors import AssembleError, CodeObjectError, DecodeError

# the KernelSpec fields a KernelMeta carries as options (name, code and args are its own)
SPEC_OPTIONS = tuple(f.name for f in dataclasses.fields(KernelSpec) if f.name not in ("name", "code", "args"))


def _hashable(v):
  return tuple(v) if isinstance(v, list) else v


@dataclass(frozen=True)
class KernelMeta:
  """A PROGRAM's arg: a KernelSpec without its code, hashable (a UOp arg): args as cowriter.Arg field tuples, the
  other fields given as (name, value) pairs in KernelSpec's order."""
  name: str
  args: tuple = ()
  options: tuple = ()
  arch: str = "gfx1100"

  @staticmethod
  def make(name: str, args=(), arch: str = "gfx1100", **options) -> "KernelMeta":
    unknown = sorted(set(options) - set(SPEC_OPTIONS))
    if unknown:
      raise CodeObjectError(f"kernel {name}: no code-object field {', '.join(unknown)} (known: {', '.join(SPEC_OPTIONS)})")
    arg_tuples = []
    for a in args:
      if isinstance(a, Arg): a = dataclasses.astuple(a)
      if not isinstance(a, tuple): raise CodeObjectError(f"kernel {name}: argument {a!r} is not a cowriter.Arg")
      try: Arg(*a)   # the fields an Arg takes
      except TypeError as e: raise CodeObjectError(f"kernel {name}: argument {a!r}: {e}") from None
      arg_tuples.append(a)
    return KernelMeta(name, tuple(arg_tuples), tuple((k, _hashable(options[k])) for k in SPEC_OPTIONS if k in options),
                      arch)

  @staticmethod
  def of(spec: KernelSpec, arch: str = "gfx1100") -> "KernelMeta":
    return KernelMeta.make(spec.name, spec.args, arch, **{k: getattr(spec, k) for k in SPEC_OPTIONS})

  def spec(self, code: bytes) -> KernelSpec:
    return KernelSpec(self.name, code, [Arg(*a) for a in self.args], **dict(self.options))


def ins(instruction) -> UOp:
  """One instruction as a UOp: LLVM-syntax text, a "name:" label, or its encoding (bytes)."""
  if isinstance(instruction, (bytes, bytearray)): instruction = bytes(instruction)
  elif isinstance(instruction, str):
    instruction = instruction.strip()
    if not instruction or "\n" in instruction:
      raise AssembleError("an INS holds one instruction or label", text=instruction)
  else: raise AssembleError(f"an INS holds an instruction's text or bytes, not a {type(instruction).__name__}")
  return UOp(Ops.INS, (), (instruction, dtypes.void))


def program(meta, instructions, **options) -> UOp:
  """PROGRAM(LINEAR(INS...)): meta is a KernelMeta, or the kernel's name with KernelMeta.make's keywords (args=,
  arch=, vgpr_count=, ...); instructions are INS UOps or what ins() takes, or an Asm (the Asm DSL's instructions,
  one INS per instruction or label, for the Asm's target unless arch= says otherwise)."""
  if isinstance(instructions, Asm):
    if not isinstance(meta, KernelMeta): options.setdefault("arch", instructions.arch)
    instructions = instructions.lines
  if not isinstance(meta, KernelMeta): meta = KernelMeta.make(meta, **options)
  elif options: raise CodeObjectError(f"kernel {meta.name}: options {sorted(options)} next to a KernelMeta")
  body = tuple(u if isinstance(u, UOp) else ins(u) for u in instructions)
  return UOp(Ops.PROGRAM, (UOp(Ops.LINEAR, body),), meta)


def _parts(prog: UOp) -> tuple[KernelMeta, tuple]:
  if not isinstance(prog, UOp) or prog.op is not Ops.PROGRAM or not isinstance(prog.arg, KernelMeta) or \
     len(prog.src) != 1 or prog.src[0].op is not Ops.LINEAR:
    raise CompileError(f"not a PROGRAM(LINEAR(INS ...)) with a KernelMeta: {prog!r:.300}")
  return prog.arg, prog.src[0].src


def program_code(prog: UOp) -> bytes:
  """The machine code of a PROGRAM: text INS assembled, encoded ones checked to be one instruction each, labels
  resolved over both (the assembler's two passes, Assembler.assemble_items)."""
  from ...isa.amd.decode import decode
  meta, body = _parts(prog)
  items = []
  for i, u in enumerate(body):
    x = u.arg[0] if u.op is Ops.INS and isinstance(u.arg, tuple) else None
    if isinstance(x, bytes):
      try: size = decode(x, 0, meta.arch).size
      except DecodeError as e: raise AssembleError(f"PROGRAM {meta.name}: INS {i} does not decode: {e}") from None
      if size != len(x):
        raise AssembleError(f"PROGRAM {meta.name}: INS {i} holds {len(x)} bytes, its instruction is {size}: one "
                            f"instruction per INS")
    elif not isinstance(x, str):
      raise CompileError(f"PROGRAM {meta.name}: element {i} is {u.op.name} {u.arg!r:.100}, not an INS of an "
                         f"instruction", u)
    items.append((i, x))
  try: return Assembler(meta.arch).assemble_items(items)
  except AssembleError as e:
    raise AssembleError(f"PROGRAM {meta.name}: INS {e.line}: {str(e).split(' (line ')[0]}", text=e.text) from None


def code_object(*programs: UOp) -> bytes:
  """One HSA code object holding the kernels of these PROGRAMs (one target)."""
  if not programs: raise CodeObjectError("a code object needs at least one PROGRAM")
  metas = [_parts(p)[0] for p in programs]
  archs = {m.arch for m in metas}
  if len(archs) != 1: raise CodeObjectError(f"PROGRAMs for several targets in one code object: {sorted(archs)}")
  return write_code_object([m.spec(program_code(p)) for m, p in zip(metas, programs)], archs.pop())
