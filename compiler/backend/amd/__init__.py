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
                   symbols, metadata; gfx11 user-SGPR padding): the only writer (the backend's render.code_object too)
    program.py     PROGRAM(LINEAR(INS ...)): instructions (text, labels or encodings) as UOps with a KernelMeta;
                   code_object(*programs) -> bytes, the path of hand-written (Asm().program) and compiled kernels
    elf.py         bounds-checked ELF64 reader; errors.py: DecodeError / AssembleError / CodeObjectError (byte offsets)
The backend: isel.py (+ isel_mem / isel_divmod / isel_wide for 64-bit int and f64 / isel_opt), regalloc.py
(linear scan; VGPRs spill to scratch, SGPRs to VGPR lanes), render.py (waitcnt, encoding), render_hazards.py (gfx11
waits, RDNA4 s_wait_alu, CDNA3 s_nop) and hazard_check.py (an independent checker of those hazards over the bytes);
gfx12.py (RDNA4: counters, split barrier, mnemonics) and gfx9.py (CDNA3 wave64: masks, legalization, s_waitcnt,
mnemonics) adapt the RDNA3 selection to gfx1200 and gfx942.
Tables: hcq.autogen.isa.gfx1100 / gfx1200, generated from llvm-mc-19 by autogen/isa/gen_rdna3.py.
CLI: `hcq disasm FILE [--raw] [--kernel NAME]`. Benchmark: bench/isa.py."""


def compile_kernel(sink, arch: str = "gfx1100") -> bytes:
  """A kernel sink from the DSL -> HSA code object bytes (the RDNA3 backend: isel*.py, regalloc.py, render*.py); a
  PROGRAM(LINEAR(INS ...)) of hand-written instructions (program.py) is written as it is, for its own target.
  This is what AMDDevice.compile() and hcq.compiler.compile(sink, "gfx1100" | "gfx1101" | "gfx1102" | "gfx1200" |
  "gfx942") call."""
  from ...ir import Ops
  if sink.op is Ops.PROGRAM:
    from ...ir import CompileError
    from .program import code_object
    if getattr(sink.arg, "arch", None) != arch:
      raise CompileError(f"PROGRAM {getattr(sink.arg, 'name', '?')} targets {getattr(sink.arg, 'arch', None)!r}, "
                         f"not {arch!r}", sink)
    return code_object(sink)
  from .render import compile_sink
  return compile_sink(sink, arch)
