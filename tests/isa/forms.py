"""Deterministic generator of instruction words for every opcode of every gfx1100 encoding, with varied operands
(VGPRs, SGPRs, special registers, inline integer/float constants, literals) and modifiers. The words are raw
material: llvm-mc-19 decides which are valid and gives their canonical text and encoding (the test oracle)."""
from __future__ import annotations

import random

from hcq.autogen.isa.gen_rdna3 import encode_fields
from hcq.compiler.isa.amd.tables import arch_tables

SRC9 = ("src0", "src1", "src2", "srcx0", "srcy0")
SSRC = ("ssrc0", "ssrc1")
SPECIAL_SCALARS = (106, 107, 124, 125, 126, 127)


def _src_value(rng: random.Random, cls: str, count: int, nine_bit: bool, allow_lit: bool) -> int:
  r = rng.random()
  if nine_bit and r < 0.45: return 256 + rng.randrange(0, 256 - count)
  if r < 0.7:
    if count == 1 and rng.random() < 0.15: return rng.choice(SPECIAL_SCALARS)
    if count == 2 and rng.random() < 0.1: return rng.choice((106, 126))
    return rng.randrange(0, 100 // max(count, 1)) * min(count, 4) if count > 1 else rng.randrange(0, 106)
  if r < 0.82: return rng.randrange(128, 209)
  if r < 0.94 or not allow_lit: return rng.randrange(240, 249)
  return 255


def _reg_value(rng: random.Random, field: str, cls: str, count: int) -> int:
  if field == "sbase": return rng.randrange(0, 50) & ~(1 if count == 4 else 0)
  if field in ("srsrc", "ssamp"): return rng.randrange(0, 25)
  if field in ("sdst", "sdata") or cls == "s":
    align = 1 if count == 1 else (2 if count == 2 else 4)
    if count == 1 and rng.random() < 0.1: return rng.choice((106, 124, 125))
    return rng.randrange(0, (100 - count) // align) * align
  if field == "vdsty": return rng.randrange(0, 127)
  return rng.randrange(0, 256 - count)


def random_word(rng: random.Random, enc: str, op: int, entry: tuple, layout: dict) -> bytes:
  name, size, template, _ = entry
  vals = {layout["op"]: op}
  used_lit = False
  for t in template:
    if t[0] != "reg": continue
    field, cls, count = t[1], t[2], t[3]
    if field in SRC9 or field in SSRC:
      v = _src_value(rng, cls, count, field in SRC9, not used_lit)
      used_lit |= v == 255
      vals[field] = v
    elif field in ("soffset",):
      seven_bit = [w for n, _, w in layout["fields"] if n == "soffset"][0] == 7
      vals[field] = rng.choice((124, rng.randrange(0, 100)) + (() if seven_bit else (128 + rng.randrange(0, 5),)))
    elif field == "saddr":
      vals[field] = rng.choice((124, rng.randrange(0, 50) * 2))
    else:
      vals[field] = _reg_value(rng, field, cls, count)
  for t in template:
    if t[0] == "simm16": vals["simm16"] = rng.choice((0, 1, rng.randrange(0, 1 << 16), rng.randrange(0, 64)))
  if enc == "SMEM" and "glc" in [f[0] for f in layout["fields"]]:
    vals["offset"] = rng.choice((0, rng.randrange(0, 1 << 12) & ~3, rng.randrange(0, 1 << 21)))
    vals["soffset"] = rng.choice((124, 124, rng.randrange(0, 100)))
    vals["glc"], vals["dlc"] = rng.random() < 0.2, rng.random() < 0.2
  elif enc == "SMEM" and "imm" in [f[0] for f in layout["fields"]]:  # gfx9/CDNA
    vals["imm"] = int(rng.random() < 0.7)
    vals["offset"] = rng.choice((0, rng.randrange(0, 1 << 12) & ~3, rng.randrange(0, 1 << 21))) if vals["imm"] \
      else rng.randrange(0, 100)
    vals["soffset_en"] = int(vals["imm"] and rng.random() < 0.3)
    if vals["soffset_en"]: vals["soffset"] = rng.randrange(0, 100)
    vals["glc"] = int(rng.random() < 0.2)
  elif enc == "SMEM":  # gfx12
    vals["offset"] = rng.choice((0, rng.randrange(0, 1 << 12) & ~3, rng.randrange(0, 1 << 24)))
    vals["soffset"] = rng.choice((124, 124, rng.randrange(0, 100)))
    vals["th"], vals["scope"] = rng.choice((0, 0, rng.randrange(4))), rng.choice((0, 0, rng.randrange(4)))
  if enc in ("VFLAT", "VGLOBAL", "VSCRATCH", "VBUFFER"):
    vals["ioffset"] = rng.choice((0, rng.randrange(0, 1 << 12), rng.randrange(0, 1 << 24)))
    vals["th"], vals["scope"] = rng.choice((0, 0, rng.randrange(8))), rng.choice((0, 0, rng.randrange(4)))
    if enc == "VSCRATCH": vals["sve"] = int(rng.random() < 0.5)
    if enc == "VFLAT": vals["saddr"] = 124
    if enc == "VBUFFER":
      vals["offen"], vals["idxen"] = rng.randrange(2), rng.randrange(2)
      if "tbuffer" in name: vals["format"] = rng.randrange(1, 78)
  if enc in ("VOP3", "VOP3SD", "VOP3P", "VINTERP"):
    if rng.random() < 0.3: vals["neg"] = rng.randrange(8)
    if enc == "VOP3" and rng.random() < 0.3: vals["abs"] = rng.randrange(8)
    if rng.random() < 0.2: vals["clmp"] = 1
    if enc in ("VOP3", "VOP3SD") and rng.random() < 0.2: vals["omod"] = rng.randrange(4)
    if enc in ("VOP3", "VOP3P") and rng.random() < 0.3: vals["opsel"] = rng.randrange(8 if enc == "VOP3P" else 16)
    if enc == "VOP3P":
      vals["opsel_hi"] = rng.choice((3, 3, rng.randrange(4)))
      vals["opsel_hi2"] = rng.choice((1, 1, 0))
      if rng.random() < 0.3: vals["neg_hi"] = rng.randrange(8)
  if enc == "DS":
    vals["offset0"], vals["offset1"] = rng.randrange(256), rng.choice((0, rng.randrange(256)))
    vals["gds"] = int(rng.random() < 0.1)
  if enc in ("FLAT", "GLOBAL", "SCRATCH"):
    vals["offset"] = rng.choice((0, rng.randrange(0, 1 << 12), rng.randrange(0, 1 << 13)))
    vals["seg"] = {"FLAT": 0, "SCRATCH": 1, "GLOBAL": 2}[enc]
    if enc == "FLAT": vals["saddr"], vals["offset"] = 124, vals["offset"] & 0xfff
    for m in ("glc", "slc", "dlc"): vals[m] = int(rng.random() < 0.2)
    if enc == "SCRATCH": vals["sve"] = int(rng.random() < 0.5)
  if enc in ("MUBUF", "MTBUF"):
    vals["offset"] = rng.choice((0, rng.randrange(1 << 12)))
    vals["offen"], vals["idxen"] = rng.randrange(2), rng.randrange(2)
    for m in ("glc", "slc", "dlc"): vals[m] = int(rng.random() < 0.2)
    if enc == "MTBUF": vals["format"] = rng.randrange(1, 78)
  if enc == "MIMG": vals["dmask"] = rng.randrange(1, 16)
  data = encode_fields(layout, vals)
  if vals.get("src0") in (233, 234, 250) or any(vals.get(f) == 255 for f in SRC9 + SSRC) or size > layout["size"]:
    data += rng.randrange(1 << 32).to_bytes(4, "little")
  return data


def random_vopd(rng: random.Random, t, layout: dict) -> bytes:
  """A VOPD pair that respects the dual-issue rules (RDNA3 ISA 7.6 "Dual issue VALU"): X and Y sources in
  different VGPR banks (index mod 4), destinations of opposite parity, at most one scalar/literal."""
  opx = rng.choice(sorted(t.vopd_x))
  opy = rng.choice(sorted(t.vopd_y))
  bx0, bx1 = rng.randrange(4), rng.randrange(4)
  by0 = rng.choice([b for b in range(4) if b != bx0])
  by1 = rng.choice([b for b in range(4) if b != bx1])
  vals = dict(opx=opx, opy=opy, vdstx=rng.randrange(256), vdsty=rng.randrange(128),
              vsrcx1=rng.randrange(64) * 4 + bx1, vsrcy1=rng.randrange(64) * 4 + by1,
              srcy0=256 + rng.randrange(64) * 4 + by0)
  r = rng.random()
  vals["srcx0"] = 255 if r < 0.15 else (128 + rng.randrange(65) if r < 0.3 else 256 + rng.randrange(64) * 4 + bx0)
  data = encode_fields(layout, vals)
  return data + rng.randrange(1 << 32).to_bytes(4, "little")


def sample_words(per_opcode: int = 3, seed: int = 1, arch: str = "gfx1100", encodings=None,
                 skip_prefixes: tuple = ()) -> list[bytes]:
  """`per_opcode` random words for every opcode of every encoding (and VOPD pairs), deterministic for a seed."""
  rng = random.Random(seed)
  t = arch_tables(arch)
  out = []
  for enc, et in t.encodings.items():
    if encodings and enc not in encodings: continue
    if enc in ("VOPD", "EXP"): continue
    for op, entry in sorted(et.ops.items()):
      if skip_prefixes and entry[0].startswith(skip_prefixes): continue
      for _ in range(per_opcode): out.append(random_word(rng, enc, op, entry, et.layout))
  if (not encodings or "VOPD" in encodings) and "VOPD" in t.encodings:
    for _ in range(per_opcode * 60): out.append(random_vopd(rng, t, t.encodings["VOPD"].layout))
  return out


def dpp_words(count_per_opcode: int = 1, seed: int = 5, arch: str = "gfx1100") -> list[bytes]:
  """VOP1/VOP2/VOPC/VOP3 words whose src0 selects DPP16 (250) or DPP8 (233/234), with a random DPP dword."""
  rng = random.Random(seed)
  t = arch_tables(arch)
  out = []
  for enc in ("VOP1", "VOP2", "VOPC", "VOP3"):
    et = t.encodings[enc]
    for op, entry in sorted(et.ops.items()):
      if not any(x[0] == "reg" and x[1] == "src0" for x in entry[2]) or entry[1] > et.size: continue
      for _ in range(count_per_opcode):
        word = random_word(rng, enc, op, entry, et.layout)[:et.size]
        kind = rng.choice((250, 250, 233, 234))
        w = int.from_bytes(word, "little")
        lo = [f for f in et.layout["fields"] if f[0] == "src0"][0][1]
        w = (w & ~(0x1ff << lo)) | kind << lo
        if enc == "VOP3": w &= ~(0x7 << 61) & ~(0x7 << 8) & ~(0x1 << 15) & ~(0x3 << 59)  # keep it simple: no modifiers
        if kind == 250:
          ctrl = rng.choice((rng.randrange(256), 0x101 + rng.randrange(15), 0x111 + rng.randrange(15),
                             0x121 + rng.randrange(15), 0x140, 0x141, 0x150 + rng.randrange(16), 0x160 + rng.randrange(16)))
          ext = rng.randrange(256) | ctrl << 8 | rng.randrange(2) << 18 | rng.randrange(2) << 19 | rng.randrange(16) << 24 \
            | rng.randrange(16) << 28
        else:
          ext = rng.randrange(256) | rng.randrange(1 << 24) << 8
        out.append(w.to_bytes(et.size, "little") + ext.to_bytes(4, "little"))
  return out
