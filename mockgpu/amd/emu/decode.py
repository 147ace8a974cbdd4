"""Instruction decoding for the emulator.

decode() wraps hcq.compiler.isa.amd.decode (the project's decoder and its generated per-architecture tables: the
same ones `hcq disasm` uses) and normalises its result for the translator, so that one translator serves gfx1100
(RDNA3), gfx1200 (RDNA4) and gfx942 (CDNA3):

- name: the RDNA3 (gfx11) LLVM mnemonic of the operation without the _e32/_e64 suffix ("v_dual_x::v_dual_y" for
  VOPD). gfx9 and gfx12 mnemonics of the same operation are renamed (global_load_dword -> global_load_b32,
  ds_read2_b32 -> ds_load_2addr_b32, v_addc_co_u32 -> v_add_co_ci_u32, s_add_co_i32 -> s_add_i32,
  v_max_num_f32 -> v_max_f32, ...); operations that exist on one architecture only keep their own name.
- encoding: gfx12's VGLOBAL/VSCRATCH/VFLAT become GLOBAL/SCRATCH/FLAT with the gfx11 field names (addr, data,
  offset as a signed byte offset, glc = the returning bit of an atomic); saddr is -1 when the instruction has none
  (NULL on gfx11/12, 0x7f on gfx9); SMEM offset is a signed byte offset and soffset an SGPR or -1 (gfx9's IMM/SOE
  forms included).
- fields: VOP3 "clmp" -> "clamp", VOP3P opsel_hi as one 3-bit value, VOPD src0x/vsrc1x/vdstx/... with VDSTY
  expanded, DPP fields in fields["dpp"] with src0 set to the DPP's VGPR, gfx9 SDWA fields in fields["sdwa"] (src0 set
  to the real operand, an SGPR when the S0 bit says so); gfx942 memory data in AccVGPRs (ACC) as registers
  ACC_BASE + k.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from ....errors import GPUFault


@dataclass
class Inst:
  """One decoded instruction: its name, encoding, opcode, size, field values and literal."""
  name: str
  encoding: str
  opcode: int
  size: int
  fields: dict = field(default_factory=dict)
  literal: int | None = None


def _illegal(words: bytes, offset: int, why: str) -> GPUFault:
  return GPUFault(f"illegal instruction {bytes(words[offset:offset + 8]).hex()} ({why})", address=None,
                  kind="illegal instruction")


def decode(code, offset: int = 0, arch: str = "gfx1100") -> Inst:
  """Decode the instruction at code[offset:] (bytes-like). Raises GPUFault(kind='illegal instruction')."""
  from ....compiler.isa.amd.decode import decode as isa_decode
  from ....compiler.isa.amd.errors import ISAError
  try:
    inst = isa_decode(code, offset, arch)
  except ISAError as e:
    raise GPUFault(f"illegal instruction {bytes(code[offset:offset + 8]).hex()} ({e})",
                   kind="illegal instruction") from None
  return _normalise(inst, code, offset, arch)


def _normalise(inst, code, offset, arch="gfx1100") -> Inst:
  name, enc, f = inst.name, inst.encoding, dict(inst.fields)
  gfx9 = arch == "gfx942"
  if name.endswith("_sdwa"):
    if not gfx9 or inst.dpp is None: raise _illegal(code, offset, "SDWA forms are not supported by the emulator")
    sd = dict(inst.dpp)
    f["sdwa"] = sd
    # SDWA src0: a VGPR, or an SGPR/constant when S0 is set (MI300 ISA "SDWA"); src1 (VOP2/VOPC vsrc1): likewise S1
    f["src0"] = sd["src0"] + (0 if sd["s0"] else 256)
    if sd["s1"]: f["vsrc1_sgpr"] = f["vsrc1"]
    name = name[:-5]
  elif inst.dpp is not None:
    if enc not in ("VOP1", "VOP2"): raise _illegal(code, offset, f"DPP in {enc} is not supported by the emulator")
    f["dpp"] = dict(inst.dpp)
    f["src0"] = inst.dpp["src0"] + 256 if "src0" in inst.dpp else f["src0"]
    name = name[:-4] if name.endswith("_dpp") else name
  if enc == "VOPD":
    x, y = (n.strip() for n in name.split("::"))
    vdstx = f["vdstx"]
    f = dict(opx=f["opx"], opy=f["opy"], src0x=f["srcx0"], vsrc1x=f["vsrcx1"], src0y=f["srcy0"], vsrc1y=f["vsrcy1"],
             vdstx=vdstx, vdsty=(f["vdsty"] << 1) | ((vdstx & 1) ^ 1), namex=_canonical(x, arch),
             namey=_canonical(y, arch))
    return Inst(name=f"{f['namex']}::{f['namey']}", encoding=enc, opcode=inst.opcode, size=inst.size, fields=f,
                literal=inst.literal)
  for suffix in ("_e32", "_e64"):
    if name.endswith(suffix): name = name[:-4]
  name = _canonical(name, arch)
  if "clmp" in f: f["clamp"] = f.pop("clmp")
  if enc == "VOP3P": f["opsel_hi"] = f.get("opsel_hi", 0) | f.pop("opsel_hi2", 0) << 2
  if enc in ("VGLOBAL", "VSCRATCH", "VFLAT"):
    # gfx12 (RDNA4 ISA "VFLAT, VGLOBAL, VSCRATCH"): 24-bit signed IOFFSET, TH bit 0 = return the pre-op value
    enc = enc[1:]
    f.update(addr=f.pop("vaddr"), data=f.pop("vsrc"), offset=_sext(f.pop("ioffset"), 24), glc=f["th"] & 1)
    f["saddr"] = -1 if f["saddr"] == 124 else f["saddr"]
  elif enc in ("GLOBAL", "SCRATCH", "FLAT"):
    if enc != "FLAT" or gfx9: f["offset"] = _sext(f["offset"], 13)   # gfx9 FLAT: 12 bits unsigned (bit 12 = 0)
    if gfx9:
      if f["acc"]: f["data"], f["vdst"] = f["data"] + ACC_BASE, f["vdst"] + ACC_BASE
      f["glc"] = f["sc0"]                      # MI300 ISA: SC0 on an atomic = return the pre-op value
      f["saddr"] = -1 if f["saddr"] == 0x7f else f["saddr"]
    else:
      f["saddr"] = -1 if f["saddr"] == 124 else f["saddr"]
  elif enc == "SMEM": _smem_offsets(f, arch)
  elif enc == "DS" and gfx9 and f["acc"]:
    f["data0"], f["data1"], f["vdst"] = f["data0"] + ACC_BASE, f["data1"] + ACC_BASE, f["vdst"] + ACC_BASE
  if enc == "VOP3SD": f.setdefault("abs", 0); f.setdefault("opsel", 0)
  if enc == "MUBUF" and name not in CACHE_CONTROL:
    raise _illegal(code, offset, f"{name} (buffer instructions are not supported)")
  return Inst(name=name, encoding=enc, opcode=inst.opcode, size=inst.size, fields=f, literal=inst.literal)


# gfx942 AccVGPR a<k> is the emulator's vector register ACC_BASE + k (VGPRs are 0-255): memory instructions with
# ACC = 1 get their data/destination fields moved there; v_accvgpr_read/write/mov name them explicitly
ACC_BASE = 256


def _sext(v: int, bits: int) -> int:
  return v - (1 << bits) if v >> (bits - 1) & 1 else v


def _smem_offsets(f: dict, arch: str) -> None:
  """SMEM address fields as a signed byte offset `offset` plus an SGPR `soffset` (-1: none)."""
  if arch == "gfx942":
    # MI300 ISA "Scalar Memory Operations": IMM = 1: OFFSET is a 21-bit signed byte offset; IMM = 0: OFFSET[7:0]
    # names an SGPR holding the offset; SOFFSET_EN adds the SGPR SOFFSET
    if f["imm"]: off, sgpr = _sext(f["offset"], 21), f["soffset"] if f["soffset_en"] else -1
    else: off, sgpr = 0, f["soffset"] if f["soffset_en"] else f["offset"] & 0xFF
    f["offset"], f["soffset"] = off, sgpr
    return
  f["offset"] = _sext(f["offset"], 24 if arch == "gfx1200" else 21)   # RDNA4: 24-bit IOFFSET; RDNA3: 21 bits
  f["soffset"] = -1 if f["soffset"] == 124 else f["soffset"]


# the buffer-format instructions that only control caches (no-ops: memory is coherent here): gfx11's GL0/GL1
# invalidates, gfx942's BUFFER_WBL2 / BUFFER_INV (clang-19 puts them around device-scope atomics and fences)
CACHE_CONTROL = frozenset(("buffer_gl0_inv", "buffer_gl1_inv", "buffer_wbl2", "buffer_inv", "buffer_wbinvl1",
                           "buffer_wbinvl1_vol"))

# ---- mnemonics of gfx9 (CDNA3) and gfx12 (RDNA4) -> the gfx11 mnemonic of the same operation ----
_GFX9 = {
  "v_add_u32": "v_add_nc_u32", "v_sub_u32": "v_sub_nc_u32", "v_subrev_u32": "v_subrev_nc_u32",
  "v_addc_co_u32": "v_add_co_ci_u32", "v_subb_co_u32": "v_sub_co_ci_u32", "v_subbrev_co_u32": "v_subrev_co_ci_u32",
  "v_ffbh_u32": "v_clz_i32_u32", "v_ffbl_b32": "v_ctz_i32_b32", "v_ffbh_i32": "v_cls_i32",
  "s_ff1_i32_b32": "s_ctz_i32_b32", "s_ff1_i32_b64": "s_ctz_i32_b64", "s_flbit_i32_b32": "s_clz_i32_u32",
  "s_flbit_i32_b64": "s_clz_i32_u64", "s_flbit_i32": "s_cls_i32",
  "s_andn2_b32": "s_and_not1_b32", "s_andn2_b64": "s_and_not1_b64", "s_orn2_b32": "s_or_not1_b32",
  "s_orn2_b64": "s_or_not1_b64",
  "ds_read2_b32": "ds_load_2addr_b32", "ds_read2_b64": "ds_load_2addr_b64",
  "ds_read2st64_b32": "ds_load_2addr_stride64_b32", "ds_read2st64_b64": "ds_load_2addr_stride64_b64",
  "ds_write2_b32": "ds_store_2addr_b32", "ds_write2_b64": "ds_store_2addr_b64",
  "ds_write2st64_b32": "ds_store_2addr_stride64_b32", "ds_write2st64_b64": "ds_store_2addr_stride64_b64",
  "ds_wrxchg_rtn_b32": "ds_storexchg_rtn_b32",
  "v_add_u16": "v_add_nc_u16", "v_sub_u16": "v_sub_nc_u16", "v_add_i16": "v_add_nc_i16", "v_sub_i16": "v_sub_nc_i16",
}
_GFX9_SIZES = {"dword": "b32", "dwordx2": "b64", "dwordx3": "b96", "dwordx4": "b128", "ubyte": "u8", "sbyte": "i8",
               "ushort": "u16", "sshort": "i16", "byte": "b8", "short": "b16"}
_GFX9_ATOMIC = {"add": "add_u32", "sub": "sub_u32", "smin": "min_i32", "umin": "min_u32", "smax": "max_i32",
                "umax": "max_u32", "and": "and_b32", "or": "or_b32", "xor": "xor_b32", "inc": "inc_u32",
                "dec": "dec_u32", "swap": "swap_b32", "cmpswap": "cmpswap_b32"}
_GFX9_ATOMIC64 = {"add": "add_u64", "sub": "sub_u64", "smin": "min_i64", "umin": "min_u64", "smax": "max_i64",
                  "umax": "max_u64", "and": "and_b64", "or": "or_b64", "xor": "xor_b64", "inc": "inc_u64",
                  "dec": "dec_u64", "swap": "swap_b64", "cmpswap": "cmpswap_b64"}
_GFX12 = {"s_add_co_u32": "s_add_u32", "s_add_co_ci_u32": "s_addc_u32", "s_add_co_i32": "s_add_i32",
          "s_sub_co_u32": "s_sub_u32", "s_sub_co_ci_u32": "s_subb_u32", "s_sub_co_i32": "s_sub_i32",
          "v_mad_co_u64_u32": "v_mad_u64_u32", "v_mad_co_i64_i32": "v_mad_i64_i32"}
_MEM9 = re.compile(r"(global|flat|scratch)_(load|store)_(\w+?)(_d16(?:_hi)?)?$")
_SEG = re.compile(r"(global|flat|scratch)_atomic_(\w+?)(_x2)?$")
_NAME_CACHE: dict = {}


def _canonical(name: str, arch: str) -> str:
  if arch == "gfx1100": return name
  key = (name, arch)
  out = _NAME_CACHE.get(key)
  if out is None: out = _NAME_CACHE[key] = _rename(name, arch)
  return out


def _rename(name: str, arch: str) -> str:
  if arch == "gfx1200":
    if name in _GFX12: return _GFX12[name]
    # IEEE 754-2019 minimumNumber/maximumNumber: what RDNA3's v_min/max_f32 computed (a NaN operand loses)
    if name.startswith("v_") and "_num_" in name: return name.replace("_num_", "_")
    return name
  if name in _GFX9: return _GFX9[name]
  if name.startswith("s_load_dword") or name.startswith("s_buffer_load_dword"):
    n = {"": 1, "x2": 2, "x4": 4, "x8": 8, "x16": 16}[name.rsplit("dword", 1)[1]]
    return name.rsplit("_dword", 1)[0] + f"_b{32 * n}"
  if name.startswith(("s_andn1_", "s_orn1_", "s_andn2_", "s_orn2_")):   # saveexec/wrexec forms
    return name.replace("andn1", "and_not0").replace("orn1", "or_not0").replace("andn2", "and_not1") \
               .replace("orn2", "or_not1")
  if name.startswith("ds_read_") or name.startswith("ds_write_"):
    return name.replace("ds_read_", "ds_load_").replace("ds_write_", "ds_store_")
  m = _MEM9.match(name)
  if m and m.group(3) in _GFX9_SIZES:
    size = _GFX9_SIZES[m.group(3)]
    if m.group(4): return f"{m.group(1)}_{m.group(2)}{m.group(4)}_{size}"       # global_load_short_d16_hi -> _d16_hi_b16
    return f"{m.group(1)}_{m.group(2)}_{size}"
  m = _SEG.match(name)
  if m and m.group(2) in _GFX9_ATOMIC:
    return f"{m.group(1)}_atomic_{(_GFX9_ATOMIC64 if m.group(3) else _GFX9_ATOMIC)[m.group(2)]}"
  return name
