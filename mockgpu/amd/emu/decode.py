"""Instruction decoding for the emulator.

decode() wraps hcq.compiler.backend.amd.decode (the project's RDNA3 decoder and tables) and normalises its result
for the translator: name = LLVM mnemonic without the _e32/_e64 suffix ("v_dual_x::v_dual_y" for VOPD), field names
as below (VOP3 "clmp" -> "clamp", VOP3P opsel_hi as one 3-bit value, VOPD src0x/vsrc1x/vdstx/... with VDSTY
expanded, DPP fields in fields["dpp"] with src0 set to the DPP's VGPR). SDWA forms are refused.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ....errors import GPUFault


@dataclass
class Inst:
  name: str
  encoding: str
  opcode: int
  size: int
  fields: dict = field(default_factory=dict)
  literal: int | None = None


def _illegal(words: bytes, offset: int, why: str) -> GPUFault:
  return GPUFault(f"illegal instruction {bytes(words[offset:offset + 8]).hex()} ({why})", address=None,
                  kind="illegal instruction")


def decode(code, offset: int = 0) -> Inst:
  """Decode the instruction at code[offset:] (bytes-like). Raises GPUFault(kind='illegal instruction')."""
  from ....compiler.backend.amd.decode import decode as isa_decode
  from ....compiler.backend.amd.errors import ISAError
  try:
    inst = isa_decode(code, offset)
  except ISAError as e:
    raise GPUFault(f"illegal instruction {bytes(code[offset:offset + 8]).hex()} ({e})",
                   kind="illegal instruction") from None
  return _normalise(inst, code, offset)


def _normalise(inst, code, offset) -> Inst:
  name, enc, f = inst.name, inst.encoding, dict(inst.fields)
  if name.endswith("_sdwa"): raise _illegal(code, offset, "SDWA forms are not supported by the emulator")
  if inst.dpp is not None:
    if enc not in ("VOP1", "VOP2"): raise _illegal(code, offset, f"DPP in {enc} is not supported by the emulator")
    f["dpp"] = dict(inst.dpp)
    f["src0"] = inst.dpp["src0"] + 256 if "src0" in inst.dpp else f["src0"]
    name = name[:-4] if name.endswith("_dpp") else name
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


_MUBUF = {43: "buffer_gl0_inv", 44: "buffer_gl1_inv"}
