"""AMD RDNA3 machine code: decoder (decode.py), disassembler (disasm.py), assembler (asm.py) and AMDGPU code
objects (codeobject.py). Tables come from hcq.autogen.isa (generated from llvm-mc-19)."""
