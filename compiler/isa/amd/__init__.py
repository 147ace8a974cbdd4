"""AMD RDNA machine code and AMDGPU code objects, with no LLVM or ROCm at run time.

    decode.py      decode(code, offset=0, arch="gfx1100") -> Inst; decode_all(code) -> [Inst]
                   Inst: name (LLVM mnemonic), encoding, opcode, size, offset, fields (ISA-document field names),
                   literal, dpp, operands (operands.Operand), str(inst) = llvm-objdump syntax
    operands.py    operand-value conventions (SGPR 0-105, VCC_LO 106, inline constants 128-208/240-248,
                   literal 255, VGPR 256-511) and the Operand tuple
    disasm.py      Inst -> text (templates from the tables, LLVM's modifier syntax)
    asm.py         assemble(text) -> bytes, Assembler(arch), and the Asm DSL (a.v_add_f32_e32(v[2], v[2], v[3]));
                   encode_fields / waitcnt_simm16 / depctr_simm16: the encoder core the RDNA3 backend uses too
    codeobject.py  CodeObject.parse(bytes): kernels (descriptor, entry, code, args incl. hidden_*, COV4/5 metadata),
                   load image with R_AMDGPU_REL64 applied; relocatable and executable ELFs
    descriptor.py  the 64-byte kernel descriptor and its rsrc1/2/3 / kernel_code_properties fields
    cowriter.py    write_code_object([KernelSpec, ...]) -> executable HSA ELF (text, descriptors, symbols, dynamic
                   symbols, metadata; gfx11 user-SGPR padding): the only writer (the backend's code objects too)
    elf.py         bounds-checked ELF64 reader; errors.py: DecodeError / AssembleError / CodeObjectError (byte offsets)
    tables.py      the per-architecture encoding tables, built on first use
Tables: hcq.autogen.isa.gfx1100 / gfx1200 / gfx942, generated from llvm-mc-19 by autogen/isa/gen_rdna3.py.
The code generator that uses the encoder is compiler/backend/amd/. CLI: `hcq disasm FILE [--raw] [--kernel NAME]`.
Benchmark: bench/isa.py."""
