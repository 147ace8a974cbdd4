"""AMD RDNA3 machine code: decoder (decode.py), disassembler (disasm.py), assembler (asm.py) and AMDGPU code
objects (codeobject.py). Tables come from hcq.autogen.isa (generated from llvm-mc-19)."""


def compile_kernel(sink, arch: str = "gfx1100") -> bytes:
  """A kernel sink from the DSL -> HSA code object bytes (the RDNA3 backend: isel.py, regalloc.py, render*.py)."""
  from .render import compile_sink
  return compile_sink(sink, arch)
