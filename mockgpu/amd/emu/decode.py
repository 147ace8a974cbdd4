"""Instruction decoding for the emulator.

decode() wraps hcq.compiler.backend.amd.decode (the project's RDNA3 decoder and tables) and normalises its result
for the translator: name = LLVM mnemonic without the _e32/_e64 suffix ("v_dual_x::v_dual_y" for VOPD), field names
as below (VOP3 "clmp" -> "clamp", VOP3P opsel_hi as one 3-bit value, VOPD src0x/vsrc1x/vdstx/... with VDSTY
expanded). DPP/SDWA forms are refused (illegal instruction for the emulator).

_fallback_decode() is the emulator's own thin decoder (opcode names from llvm-mc-19, fallback_opcodes.json), kept
only while the shared tables miss an instruction clang emits (VOPD v_dual_mov_b32 before the rdna3-isa fix reaches
main); delete it and fallback_opcodes.json then. Field positions: AMD "RDNA3 Instruction Set Architecture"
reference guide, chapter "Microcode formats".
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

from ....errors import GPUFault

with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "fallback_opcodes.json")) as _f:
  _TABLES = {enc: {int(op): name for op, name in ops.items()} for enc, ops in json.load(_f).items()}

LITERAL = 255  # src operand code: a 32-bit literal dword follows the instruction


@dataclass
class Inst:
  name: str
  encoding: str
  opcode: int
  size: int
  fields: dict = field(default_factory=dict)
  literal: int | None = None


def _bits(w: int, hi: int, lo: int) -> int:
  return (w >> lo) & ((1 << (hi - lo + 1)) - 1)


def _illegal(words: bytes, offset: int, why: str) -> GPUFault:
  return GPUFault(f"illegal instruction {words[offset:offset + 8].hex()} ({why})", address=None,
                  kind="illegal instruction")


def _dword(code, offset: int) -> int:
  if offset + 4 > len(code): raise _illegal(code, offset, "instruction runs past the end of the code")
  return int.from_bytes(code[offset:offset + 4], "little")


def _name(encoding: str, op: int, code, offset: int) -> str:
  name = _TABLES.get(encoding, {}).get(op)
  if name is None: raise _illegal(code, offset, f"{encoding} opcode {op} is not a gfx1100 instruction")
  return name


def decode(code, offset: int = 0) -> Inst:
  """Decode the instruction at code[offset:] (bytes-like). Raises GPUFault(kind='illegal instruction')."""
  from ....compiler.backend.amd.decode import decode as isa_decode
  from ....compiler.backend.amd.errors import ISAError
  try:
    inst = isa_decode(code, offset)
  except ISAError as e:
    try:
      return _fallback_decode(code, offset)
    except GPUFault:
      raise GPUFault(f"illegal instruction {bytes(code[offset:offset + 8]).hex()} ({e})",
                     kind="illegal instruction") from None
  return _normalise(inst, code, offset)


def _normalise(inst, code, offset) -> Inst:
  name, enc, f = inst.name, inst.encoding, dict(inst.fields)
  if inst.dpp is not None or name.endswith(("_dpp", "_sdwa")):
    raise _illegal(code, offset, "DPP/SDWA forms are not supported by the emulator")
  if enc == "VOPD":
    x, y = (n.strip() for n in name.split("::"))
    vdstx = f["vdstx"]
    f = dict(opx=f["opx"], opy=f["opy"], src0x=f["srcx0"], vsrc1x=f["vsrcx1"], src0y=f["srcy0"], vsrc1y=f["vsrcy1"],
             vdstx=vdstx, vdsty=(f["vdsty"] << 1) | ((vdstx & 1) ^ 1), namex=x, namey=y)
    return Inst(name=f"{x}::{y}", encoding=enc, opcode=inst.opcode, size=inst.size, fields=f, literal=inst.literal)
  for suffix in ("_e32", "_e64"):
    if name.endswith(suffix): name = name[:-4]
  if "clmp" in f: f["clamp"] = f.pop("clmp")
  if enc == "VOP3P": f["opsel_hi"] = f.get("opsel_hi", 0) | f.pop("opsel_hi2", 0) << 2
  if enc in ("GLOBAL", "SCRATCH") and f["offset"] & 0x1000: f["offset"] -= 0x2000
  if enc == "VOP3SD": f.setdefault("abs", 0); f.setdefault("opsel", 0)
  if enc == "MUBUF" and name not in _MUBUF.values():
    raise _illegal(code, offset, f"{name} (buffer instructions are not supported)")
  return Inst(name=name, encoding=enc, opcode=inst.opcode, size=inst.size, fields=f, literal=inst.literal)


def _fallback_decode(code, offset: int = 0) -> Inst:
  w0 = _dword(code, offset)
  f: dict = {}
  top = w0 >> 23
  if w0 >> 30 == 0b10:
    if top == 0b101111101:
      enc, op = "SOP1", _bits(w0, 15, 8)
      f.update(sdst=_bits(w0, 22, 16), ssrc0=_bits(w0, 7, 0))
    elif top == 0b101111110:
      enc, op = "SOPC", _bits(w0, 22, 16)
      f.update(ssrc0=_bits(w0, 7, 0), ssrc1=_bits(w0, 15, 8))
    elif top == 0b101111111:
      enc, op = "SOPP", _bits(w0, 22, 16)
      f.update(simm16=_bits(w0, 15, 0))
    elif w0 >> 28 == 0b1011:
      enc, op = "SOPK", _bits(w0, 27, 23)
      f.update(sdst=_bits(w0, 22, 16), simm16=_bits(w0, 15, 0))
    else:
      enc, op = "SOP2", _bits(w0, 29, 23)
      f.update(sdst=_bits(w0, 22, 16), ssrc0=_bits(w0, 7, 0), ssrc1=_bits(w0, 15, 8))
    size = 4
    srcs = [f[k] for k in ("ssrc0", "ssrc1") if k in f]
  elif w0 >> 31 == 0:
    if w0 >> 25 == 0b0111111:
      enc, op = "VOP1", _bits(w0, 16, 9)
      f.update(vdst=_bits(w0, 24, 17), src0=_bits(w0, 8, 0))
    elif w0 >> 25 == 0b0111110:
      enc, op = "VOPC", _bits(w0, 24, 17)
      f.update(src0=_bits(w0, 8, 0), vsrc1=_bits(w0, 16, 9))
    else:
      enc, op = "VOP2", _bits(w0, 30, 25)
      f.update(vdst=_bits(w0, 24, 17), src0=_bits(w0, 8, 0), vsrc1=_bits(w0, 16, 9))
    size = 4
    srcs = [f["src0"]]
  else:
    w1 = _dword(code, offset + 4)
    size = 8
    srcs = []
    top6 = w0 >> 26
    if top6 == 0b111101:
      enc, op = "SMEM", _bits(w0, 25, 18)
      f.update(sbase=_bits(w0, 5, 0), sdata=_bits(w0, 12, 6), glc=_bits(w0, 14, 14), dlc=_bits(w0, 13, 13),
               offset=_bits(w1, 20, 0), soffset=_bits(w1, 31, 25))
    elif top6 == 0b110101:
      enc, op = "VOP3", _bits(w0, 25, 16)
      f.update(vdst=_bits(w0, 7, 0), abs=_bits(w0, 10, 8), sdst=_bits(w0, 14, 8), opsel=_bits(w0, 14, 11),
               clamp=_bits(w0, 15, 15), src0=_bits(w1, 8, 0), src1=_bits(w1, 17, 9), src2=_bits(w1, 26, 18),
               omod=_bits(w1, 28, 27), neg=_bits(w1, 31, 29))
      srcs = [f["src0"], f["src1"], f["src2"]]
    elif w0 >> 24 == 0b11001100:
      enc, op = "VOP3P", _bits(w0, 22, 16)
      f.update(vdst=_bits(w0, 7, 0), neg_hi=_bits(w0, 10, 8), opsel=_bits(w0, 13, 11),
               opsel_hi=_bits(w0, 14, 14) << 2 | _bits(w1, 28, 27), clamp=_bits(w0, 15, 15),
               src0=_bits(w1, 8, 0), src1=_bits(w1, 17, 9), src2=_bits(w1, 26, 18), neg=_bits(w1, 31, 29))
      srcs = [f["src0"], f["src1"], f["src2"]]
    elif top6 == 0b110010:
      enc, op = "VOPD", _bits(w0, 25, 22)
      opy = _bits(w0, 21, 17)
      vdstx = _bits(w1, 31, 24)
      f.update(opx=op, opy=opy, src0x=_bits(w0, 8, 0), vsrc1x=_bits(w0, 16, 9), src0y=_bits(w1, 8, 0),
               vsrc1y=_bits(w1, 16, 9), vdstx=vdstx, vdsty=(_bits(w1, 23, 17) << 1) | ((vdstx & 1) ^ 1))
      srcs = [f["src0x"], f["src0y"]]
      namex = _name("VOPD_X", op, code, offset)
      namey = _name("VOPD_Y", opy, code, offset)
      f.update(namex=namex, namey=namey)
      if namex in ("v_dual_fmaak_f32", "v_dual_fmamk_f32") or namey in ("v_dual_fmaak_f32", "v_dual_fmamk_f32"):
        srcs.append(LITERAL)
    elif top6 == 0b110110:
      enc, op = "DS", _bits(w0, 25, 18)
      f.update(offset0=_bits(w0, 7, 0), offset1=_bits(w0, 15, 8), gds=_bits(w0, 17, 17), addr=_bits(w1, 7, 0),
               data0=_bits(w1, 15, 8), data1=_bits(w1, 23, 16), vdst=_bits(w1, 31, 24))
    elif top6 == 0b110111:
      seg = _bits(w0, 17, 16)
      enc = {0: "FLAT", 1: "SCRATCH", 2: "GLOBAL"}.get(seg)
      if enc is None: raise _illegal(code, offset, "FLAT segment 3")
      op = _bits(w0, 24, 18)
      off = _bits(w0, 12, 0)
      if enc != "FLAT" and off & 0x1000: off -= 0x2000
      f.update(offset=off, dlc=_bits(w0, 13, 13), glc=_bits(w0, 14, 14), slc=_bits(w0, 15, 15), seg=seg,
               addr=_bits(w1, 7, 0), data=_bits(w1, 15, 8), saddr=_bits(w1, 22, 16), sve=_bits(w1, 23, 23),
               vdst=_bits(w1, 31, 24))
    elif top6 == 0b111000:
      # MUBUF: only the cache invalidates (RDNA3 ISA, MUBUF opcodes 43/44) are emitted for compute kernels.
      enc, op = "MUBUF", _bits(w0, 25, 18)
      if op not in _MUBUF: raise _illegal(code, offset, f"MUBUF opcode {op} (buffer instructions are not supported)")
    else:
      raise _illegal(code, offset, "unsupported encoding")
  if enc == "VOPD":
    name = f["namex"] + "::" + f["namey"]
  elif enc == "MUBUF":
    name = _MUBUF[op]
  else:
    name = _name(enc, op, code, offset)
  if enc == "VOP3" and name in _VOP3SD: enc = "VOP3SD"
  if enc in ("VOP2",) and name in ("v_fmaak_f32", "v_fmamk_f32", "v_fmaak_f16", "v_fmamk_f16"): srcs.append(LITERAL)
  if enc == "SOPK" or enc == "SOPP": srcs = []
  if enc in ("SOP2", "SOPC") and name.startswith("s_") is False: srcs = []
  literal = None
  if LITERAL in srcs:
    literal = _dword(code, offset + size)
    size += 4
  if enc in ("VOP3", "VOP3SD", "VOP3P") and any(s in (0xE9, 0xEA, 0xFA) for s in srcs[:1]):
    raise _illegal(code, offset, "DPP is not supported by the emulator")
  if enc in ("VOP1", "VOP2", "VOPC") and f["src0"] in (0xE9, 0xEA, 0xFA):
    raise _illegal(code, offset, "DPP/SDWA forms are not supported by the emulator")
  return Inst(name=name, encoding=enc, opcode=op, size=size, fields=f, literal=literal)


# VOP3 opcodes that use the VOP3SD layout (sdst in [14:8] instead of abs/opsel): RDNA3 ISA, "VOP3SD".
_VOP3SD = {"v_add_co_u32", "v_sub_co_u32", "v_subrev_co_u32", "v_add_co_ci_u32", "v_sub_co_ci_u32",
           "v_subrev_co_ci_u32", "v_div_scale_f32", "v_div_scale_f64", "v_mad_u64_u32", "v_mad_i64_i32"}

_MUBUF = {43: "buffer_gl0_inv", 44: "buffer_gl1_inv"}
