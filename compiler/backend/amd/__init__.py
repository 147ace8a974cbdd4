"""The RDNA3 code generator: a kernel sink -> machine code -> an HSA code object (the encoder, decoder and code-object
reader/writer it uses are the instruction-set toolkit, compiler/isa/amd/).

    program.py     PROGRAM(LINEAR(INS ...)): instructions (text, labels or encodings) as UOps with a KernelMeta;
                   code_object(*programs) -> bytes, the path of hand-written (program(name, Asm)) and compiled kernels
The backend: isel.py (+ isel_mem / isel_divmod / isel_wide for 64-bit int and f64 / isel_opt), regalloc.py
(linear scan; VGPRs spill to AccVGPRs on gfx942, then to scratch; SGPRs to VGPR lanes), render.py (waitcnt,
branch resolution), encode.py (per-shape encoding plans), waits.py (s_waitcnt placement), render_hazards.py (gfx11 waits, RDNA4 s_wait_alu, CDNA3 s_nop) and hazard_check.py (an independent
checker of those hazards over the bytes);
gfx12.py (RDNA4: counters, split barrier, mnemonics) and gfx9.py (CDNA3 wave64: masks, legalization, s_waitcnt,
mnemonics) adapt the RDNA3 selection to gfx1200 and gfx942."""


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
