"""Operand encoding conventions of RDNA3, shared by the decoder, the disassembler and the assembler.

Scalar source/destination values (AMD RDNA3 ISA Reference Guide, 16.1 "SOP2": table of SSRC0/SSRC1/SDST values;
the same table is used by the 9-bit vector source fields, 16.3 "VOP2"/"VOP3": SRC0):
    0-105    SGPR s0..s105
    106/107  VCC_LO / VCC_HI           (a 64-bit operand at 106 is `vcc`)
    108-123  TTMP0..TTMP15
    124      NULL                      125 M0         126/127 EXEC_LO / EXEC_HI (64-bit at 126: `exec`)
    128      integer 0                 129-192 integers 1..64        193-208 integers -1..-16
    233/234  DPP8 / DPP8 with FI=1     (VOP1/VOP2/VOPC/VOP3 src0 only: an extra DPP dword follows)
    235-238  SHARED_BASE, SHARED_LIMIT, PRIVATE_BASE, PRIVATE_LIMIT      239 POPS_EXITING_WAVE_ID
    240-247  floats 0.5, -0.5, 1.0, -1.0, 2.0, -2.0, 4.0, -4.0           248 1/(2*pi)
    250      DPP16 (src0 only)          251 VCCZ   252 EXECZ   253 SCC   254 LDS_DIRECT
    255      32-bit literal constant following the instruction
    256-511  VGPR v0..v255 (9-bit source fields only; 8-bit VGPR fields hold the VGPR number directly)
Inline float constants are given to an instruction in its operand's type (f16 0x3800 for 0.5, f32 0x3f000000,
f64 0x3fe0000000000000; 16.3.1 "Inline constants"); LLVM prints them by value (0.5, 0.15915494), which is what
`Operand.text` holds. Literals print as hex of the 32-bit value (an f64 operand uses it as the high half).
"""
from __future__ import annotations

from typing import NamedTuple

SPECIAL_NAMES = {106: "vcc_lo", 107: "vcc_hi", 124: "null", 125: "m0", 126: "exec_lo", 127: "exec_hi",
                 235: "src_shared_base", 236: "src_shared_limit", 237: "src_private_base", 238: "src_private_limit",
                 239: "src_pops_exiting_wave_id", 251: "src_vccz", 252: "src_execz", 253: "src_scc",
                 254: "src_lds_direct"}
SPECIAL_NAMES_64 = {106: "vcc", 126: "exec"}
INLINE_FLOATS = {240: 0.5, 241: -0.5, 242: 1.0, 243: -1.0, 244: 2.0, 245: -2.0, 246: 4.0, 247: -4.0,
                 248: 0.15915494309189535}
INLINE_FLOAT_TEXT = {240: "0.5", 241: "-0.5", 242: "1.0", 243: "-1.0", 244: "2.0", 245: "-2.0", 246: "4.0",
                     247: "-4.0", 248: "0.15915494"}
# gfx9/CDNA (gfx942) scalar operand values differ (MI300 ISA "SSRC0" table): s0-s101, 102/103 FLAT_SCRATCH_LO/HI,
# 104/105 XNACK_MASK_LO/HI, 124 M0, 125 NULL (as LLVM names it), 126/127 EXEC
_GFX9_NAMES = {**SPECIAL_NAMES, 102: "flat_scratch_lo", 103: "flat_scratch_hi", 104: "xnack_mask_lo",
               105: "xnack_mask_hi", 124: "m0", 125: "null"}
_GFX9_NAMES_64 = {102: "flat_scratch", 104: "xnack_mask", 106: "vcc", 126: "exec"}
NAMES_BY_ARCH = {"gfx942": (_GFX9_NAMES, _GFX9_NAMES_64, 102)}
LITERAL = 255
VGPR_BASE = 256
DPP16, DPP8, DPP8_FI = 250, 233, 234
SDWA = 249    # gfx9 (gfx942): src0 = 0xf9 selects the sub-dword addressing dword that follows a VOP1/VOP2/VOPC word


class Operand(NamedTuple):
  """One decoded operand. kind: 'vgpr' | 'sgpr' | 'ttmp' | 'special' | 'int' | 'float' | 'literal' | 'imm' | 'text'.
  index/count: first register and number of registers (registers only); value: the constant (int/float), the
  literal dword, or the immediate; field: the encoding field it came from; text: llvm-objdump spelling."""
  kind: str
  index: int | None
  count: int
  value: int | float | None
  field: str | None
  text: str


def reg_text(prefix: str, index: int, count: int) -> str:
  return f"{prefix}{index}" if count == 1 else f"{prefix}[{index}:{index + count - 1}]"


def scalar_operand(value: int, count: int, field: str | None, arch: str = "gfx1100") -> Operand | None:
  """Operand for a scalar-register encoding value 0..127 (None if reserved)."""
  if arch in NAMES_BY_ARCH:
    names, names64, nsgpr = NAMES_BY_ARCH[arch]
    if value < nsgpr: return Operand("sgpr", value, count, None, field, reg_text("s", value, count))
    if 108 <= value <= 123:
      return Operand("ttmp", value - 108, count, None, field, reg_text("ttmp", value - 108, count))
    if count == 2 and value in names64: return Operand("special", value, count, None, field, names64[value])
    if value in names: return Operand("special", value, count, None, field, names[value])
    return None
  if value < 106:
    return Operand("sgpr", value, count, None, field, reg_text("s", value, count))
  if 108 <= value <= 123:
    return Operand("ttmp", value - 108, count, None, field, reg_text("ttmp", value - 108, count))
  if count == 2 and value in SPECIAL_NAMES_64:
    return Operand("special", value, count, None, field, SPECIAL_NAMES_64[value])
  if value in SPECIAL_NAMES:
    return Operand("special", value, count, None, field, SPECIAL_NAMES[value])
  return None


def source_operand(value: int, count: int, field: str | None, literal: int | None,
                   arch: str = "gfx1100") -> Operand | None:
  """Operand for a 9-bit (or 8-bit scalar) source value; None if the value is reserved."""
  if value >= VGPR_BASE:
    return Operand("vgpr", value - VGPR_BASE, count, None, field, reg_text("v", value - VGPR_BASE, count))
  if value < 128:
    return scalar_operand(value, count, field, arch)
  if value <= 208:
    n = value - 128 if value <= 192 else 192 - value
    return Operand("int", None, 0, n, field, str(n))
  if value in INLINE_FLOATS:
    return Operand("float", None, 0, INLINE_FLOATS[value], field, INLINE_FLOAT_TEXT[value])
  if value == LITERAL:
    return Operand("literal", None, 0, literal, field, f"0x{literal:x}" if literal is not None else "<literal>")
  if value in SPECIAL_NAMES:
    return Operand("special", value, count, None, field, SPECIAL_NAMES[value])
  return None
