"""Translation of vector ALU instructions: VOP1/VOP2/VOP3/VOP3SD/VOPC, VOP3P (packed 16-bit, fma_mix, dot2),
VOPD and the DPP forms. Semantics: AMD "RDNA3 Instruction Set Architecture", "Vector ALU operations"; the
per-mnemonic expressions live in valu_ops.py."""
from __future__ import annotations

from typing import NamedTuple

from .decode import ACC_BASE, Inst
from .gen import EXEC, FLOATS, HALF, LIT, NP_TYPE, VCC, WIDE, Gen, Unsupported, _out_mods, _src_mods
from .valu_ops import CMP_F, CMP_I, DUAL, OPS, PACKED, PACKED32

# ---- VALU: the operand fields every form shares (Fields), the instructions with their own semantics in VALU_SPECIAL
# (mnemonic -> handler), V_CMP*/V_CMPX* in _vopc, and every other mnemonic through its expression in valu_ops.OPS
class Fields(NamedTuple):
  """The operands and modifiers of a VOP1/VOP2/VOPC/VOP3/VOP3SD instruction (0 where its encoding has none)."""
  vop3: bool
  srcs: list          # the source operand codes (VOP1/2/C: src0 and VSRC1 as 256 + v)
  absm: int
  negm: int
  opsel: int
  clamp: int
  omod: int

  @staticmethod
  def of(inst: Inst) -> "Fields":
    enc, f = inst.encoding, inst.fields
    vop3 = enc in ("VOP3", "VOP3SD")
    srcs = [f["src0"], f.get("vsrc1_sgpr", f.get("vsrc1", 0) + 256)] if not vop3 else [f["src0"], f["src1"], f["src2"]]
    return Fields(vop3, srcs, f["abs"] if enc == "VOP3" else 0, f["neg"] if vop3 else 0,
                  f["opsel"] if enc == "VOP3" else 0, f["clamp"] if vop3 else 0, f["omod"] if vop3 else 0)


def _valu(g: Gen, pc: int, inst: Inst) -> None:
  name, f = inst.name, inst.fields
  x = Fields.of(inst)
  if "dpp" in f and name not in OPS: raise Unsupported(inst, pc, "in a DPP form is not supported by the emulator")
  if "sdwa" in f and name not in OPS and not name.startswith("v_cmp"):
    raise Unsupported(inst, pc, "in an SDWA form is not supported by the emulator")
  if name.startswith("v_cmp_") or name.startswith("v_cmpx_"):
    return _vopc(g, pc, inst, x.srcs, x.absm, x.negm, x.opsel)
  special = VALU_SPECIAL.get(name)
  if special is not None: return special(g, pc, inst, x)
  _valu_op(g, pc, inst, x)


def _cndmask(g: Gen, pc: int, inst: Inst, x: Fields) -> None:
  f, absm, negm = inst.fields, x.absm, x.negm
  mask = g.lane_mask_src(f["src2"] if x.vop3 else VCC, inst)
  a = _src_mods(g, g.vsrc(x.srcs[0], inst, "f32" if (absm | negm) & 1 else "u32"), "f32", 0, absm, negm)
  b = _src_mods(g, g.vsrc(x.srcs[1], inst, "f32" if (absm | negm) & 2 else "u32"), "f32", 1, absm, negm)
  if (absm | negm) & 3:
    a = a if not (absm | negm) & 1 else f"np.asarray({a}, f32).view(u32)"
    b = b if not (absm | negm) & 2 else f"np.asarray({b}, f32).view(u32)"
  g.write_v(f["vdst"], f"np.where({mask}, {b}, {a})")


def _add_co(g: Gen, pc: int, inst: Inst, x: Fields) -> None:
  """u32 arithmetic with carry/borrow out (and in: _ci_) to a lane mask, cheaper than widening to 64 bits."""
  name, f = inst.name, inst.fields
  a = g.vsrc(x.srcs[0], inst, "u32")
  b = g.vsrc(x.srcs[1], inst, "u32")
  if "subrev" in name: a, b = b, a
  r, cv = g.tmp(), g.tmp()
  add = "add" in name
  if "_ci_" in name:
    cin = g.lane_mask_src(f["src2"] if x.vop3 else VCC, inst)
    t, c = g.tmp(), g.tmp()
    g.emit(f"{c} = {cin}")
    if add: g.emit(f"{t} = {a} + {b}; {r} = {t} + {c}; {cv} = ({t} < {a}) | ({r} < {t})")
    else: g.emit(f"{t} = {a} - {b}; {r} = {t} - {c}; {cv} = ({b} > {a}) | ({c} > {t})")
  elif add: g.emit(f"{r} = {a} + {b}; {cv} = {r} < {a}")
  else: g.emit(f"{r} = {a} - {b}; {cv} = {b} > {a}")
  g.write_v(f["vdst"], r)
  g.write_lanes(f["sdst"] if x.vop3 else VCC, cv)


def _mad64(g: Gen, pc: int, inst: Inst, x: Fields) -> None:
  """V_MAD_U64_U32 / V_MAD_I64_I32: a 64-bit D = S0 * S1 + S2, the carry out of the unsigned form to SDST."""
  f, srcs = inst.fields, x.srcs
  signed = inst.name == "v_mad_i64_i32"
  ty = "i32" if signed else "u32"
  a = f"np.asarray({g.vsrc(srcs[0], inst, ty)}).astype({'i64' if signed else 'u64'})"
  b = f"np.asarray({g.vsrc(srcs[1], inst, ty)}).astype({'i64' if signed else 'u64'})"
  c = g.vsrc(srcs[2], inst, "i64" if signed else "u64")
  r = g.tmp()
  if signed:
    g.emit(f"{r} = ({a} * {b}) + {c}")
    g.write_v_typed(f["vdst"], r, "i64")
    return g.write_lanes(f["sdst"], "np.zeros(nl, bool)")
  p = g.tmp()
  g.emit(f"{p} = {a} * {b}")
  g.emit(f"{r} = {p} + {c}")
  g.write_v_typed(f["vdst"], r, "u64")
  g.write_lanes(f["sdst"], f"{r} < {p}")


def _div_scale(g: Gen, pc: int, inst: Inst, x: Fields) -> None:
  f, ty = inst.fields, inst.name[-3:]
  a, b, c = (_src_mods(g, g.vsrc(x.srcs[i], inst, ty), ty, i, 0, x.negm) for i in range(3))
  r = g.tmp()
  g.emit(f"{r}, {r}c = R.div_scale({a}, {b}, {c}, {ty})")
  g.write_v_typed(f["vdst"], r, ty)
  g.write_lanes(f["sdst"], f"{r}c")


def _div_fmas(g: Gen, pc: int, inst: Inst, x: Fields) -> None:
  f, ty = inst.fields, inst.name[-3:]
  a, b, c = (_src_mods(g, g.vsrc(x.srcs[i], inst, ty), ty, i, x.absm, x.negm) for i in range(3))
  g.write_v_typed(f["vdst"], _out_mods(f"R.div_fmas({a}, {b}, {c}, {g.lane_mask_src(VCC, inst)}, {ty})", ty, x.clamp,
                                       x.omod), ty)


def _readlane(g: Gen, pc: int, inst: Inst, x: Fields) -> None:
  lane = g.raw_scalar(x.srcs[1], inst) if x.vop3 else None
  g.write_s(inst.fields["vdst"], f"np.broadcast_to({g.vsrc(x.srcs[0], inst, 'u32')}, nl)"
                                 f"[np.arange(n), np.asarray({lane}, u32) & u32(L - 1)]")


def _readfirstlane(g: Gen, pc: int, inst: Inst, x: Fields) -> None:
  v = g.vsrc(x.srcs[0], inst, "u32")
  ctz = f"R.ctz64(R.p64({g.s(EXEC)}, {g.s(EXEC + 1)}))" if g.wave64 else f"R.ctz32({g.s(EXEC)})"
  first = f"np.where(~{g.mask_nonzero(EXEC)}, u32(0), {ctz})"
  g.write_s(inst.fields["vdst"], f"np.broadcast_to({v}, nl)[np.arange(n), {first}]")


def _writelane(g: Gen, pc: int, inst: Inst, x: Fields) -> None:
  val = g.raw_scalar(x.srcs[0], inst)
  lane = g.raw_scalar(x.srcs[1], inst)
  d = inst.fields["vdst"]
  t = g.tmp()
  g.emit(f"{t} = {g.v(d)}.copy(); {t}[np.arange(n), np.asarray({lane}, u32) & u32(L - 1)] = {val}")
  g.vregs.add(d)
  g.v_written.add(d)
  g.wide.pop(d, None); g.wide.pop(d - 1, None)
  g.emit(f"v{d} = {t}")


def _mbcnt(g: Gen, pc: int, inst: Inst, x: Fields) -> None:
  """D = S1 + the number of bits of S0 for the lanes below this one, within EXEC_LO (lo) or EXEC_HI (hi)."""
  name, d = inst.name, inst.fields["vdst"]
  a = g.vsrc(x.srcs[0], inst, "u32")
  b = g.vsrc(x.srcs[1], inst, "u32")
  if g.wave64:
    below = "R.LANE_BELOW64_HI" if name == "v_mbcnt_hi_u32_b32" else "R.LANE_BELOW64_LO"
    return g.write_v(d, f"R.popcount(np.asarray({a}, u32) & {below}) + {b}")
  if name == "v_mbcnt_hi_u32_b32": return g.write_v(d, f"np.asarray({b}, u32) + u32(0)")   # wave32: hi = 0
  g.write_v(d, f"R.popcount(np.asarray({a}, u32) & R.LANE_BELOW) + {b}")


def _swap(g: Gen, pc: int, inst: Inst, x: Fields) -> None:
  a, b = inst.fields["vdst"], x.srcs[0] - 256
  ta, tb = g.tmp(), g.tmp()
  g.emit(f"{ta} = {g.v(a)}; {tb} = {g.v(b)}")
  g.write_v(a, tb)
  g.write_v(b, ta)


def _nop(g: Gen, pc: int, inst: Inst, x: Fields) -> None:
  """V_NOP."""


def _accvgpr_mov(g: Gen, pc: int, inst: Inst, x: Fields) -> None:
  """MI300 ISA V_ACCVGPR_MOV_B32: AccVGPR to AccVGPR (src0 = 256 + the source AccVGPR)."""
  g.write_v(ACC_BASE + inst.fields["vdst"], g.v(ACC_BASE + x.srcs[0] - 256))


def _permlane16(g: Gen, pc: int, inst: Inst, x: Fields) -> None:
  src = g.vsrc(x.srcs[0], inst, "u32")
  s1, s2 = g.raw_scalar(x.srcs[1], inst), g.raw_scalar(x.srcs[2], inst)
  t = g.tmp()
  g.emit(f"{t}, dppw = R.permlane16({src}, {s1}, {s2}, {inst.name == 'v_permlanex16_b32'}, {x.opsel & 1}, "
         f"{x.opsel >> 1 & 1}, em, ef, n)")
  g.emit("em_s, ef_s = em, ef")
  g.emit("em = (np.ones(nl, bool) if ef else em) & dppw; ef = False")
  g.write_v(inst.fields["vdst"], t)
  g.emit("em, ef = em_s, ef_s")


VALU_SPECIAL = {
  "v_cndmask_b32": _cndmask,
  **dict.fromkeys(("v_add_co_u32", "v_sub_co_u32", "v_subrev_co_u32", "v_add_co_ci_u32", "v_sub_co_ci_u32",
                   "v_subrev_co_ci_u32"), _add_co),
  "v_mad_u64_u32": _mad64, "v_mad_i64_i32": _mad64,
  "v_div_scale_f32": _div_scale, "v_div_scale_f64": _div_scale,
  "v_div_fmas_f32": _div_fmas, "v_div_fmas_f64": _div_fmas,
  "v_readlane_b32": _readlane, "v_readfirstlane_b32": _readfirstlane, "v_writelane_b32": _writelane,
  "v_mbcnt_lo_u32_b32": _mbcnt, "v_mbcnt_hi_u32_b32": _mbcnt,
  "v_swap_b32": _swap, "v_nop": _nop, "v_accvgpr_mov_b32": _accvgpr_mov,
  "v_permlane16_b32": _permlane16, "v_permlanex16_b32": _permlane16,
}
# D = S0 * S1 + D: the destination is the third source
_ACCUMULATE = frozenset(("v_fmac_f32", "v_fmac_f16", "v_fmac_f64", "v_mac_f32", "v_mac_f16"))
# D = S0 * S1 + K / S0 * K + S1: the literal is the third source
_LITERAL_K = frozenset(("v_fmaak_f32", "v_fmamk_f32", "v_fmaak_f16", "v_fmamk_f16", "v_madak_f32", "v_madmk_f32"))


def _valu_op(g: Gen, pc: int, inst: Inst, x: Fields) -> None:
  """An instruction of valu_ops.OPS: its sources read with their modifiers (16-bit halves, DPP, SDWA, denormal
  flushing), the expression, then the output modifiers and the write (DPP-masked lanes, SDWA selects)."""
  name, f = inst.name, inst.fields
  srcs, absm, negm, opsel, vop3 = x.srcs, x.absm, x.negm, x.opsel, x.vop3
  op = OPS.get(name)
  if op is None: raise Unsupported(inst, pc)
  dty, stys, tmpl = op
  args = []
  nsrc = len(stys)
  if name in _ACCUMULATE: srcs = srcs[:2] + [f["vdst"] + 256]
  if name in _LITERAL_K: srcs = srcs[:2] + [LIT]
  dst, dst_hi = f["vdst"], bool(opsel >> 3 & 1)
  if not vop3 and dty in HALF and dst >= 128: dst, dst_hi = dst - 128, True
  for i, ty in enumerate(stys):
    hi = bool(opsel >> i & 1)
    code = srcs[i]
    if not vop3 and ty in HALF and code >= 256 + 128:
      # VOP1/VOP2/VOPC 16-bit operands: VGPR field bit 7 selects the high half (RDNA3 ISA "16-bit VGPRs")
      code, hi = code - 128, True
    if i == 0 and "dpp" in f:
      e = _dpp_src0(g, inst, code, ty, hi)
      if f["dpp"].get("src0_abs"): e = f"np.abs({e})"
      if f["dpp"].get("src0_neg"): e = f"(-{e})"
    elif "sdwa" in f and i < 2:
      e = _sdwa_src(g, inst, i, code, ty)
    else:
      e = g.vsrc(code, inst, ty, hi)
      if i == 1 and "dpp" in f:
        if f["dpp"].get("src1_abs"): e = f"np.abs({e})"
        if f["dpp"].get("src1_neg"): e = f"(-{e})"
    if g.ftz.get(ty, (False,))[0] and name not in ("v_mov_b32",): e = f"R.ftz({e})"
    args.append(_src_mods(g, e, ty, i, absm, negm))
  expr = _out_mods(tmpl.format(*args[:nsrc]), dty, x.clamp, x.omod)
  if g.ftz.get(dty, (False, False))[1]: expr = f"R.ftz(np.asarray({expr}, {NP_TYPE[dty]}))"
  if "dpp" in f:
    # lanes whose DPP source is invalid (and bound_ctrl is 0) or whose row/bank is masked off are not written
    g.emit("em_s, ef_s = em, ef")
    g.emit("em = (np.ones(nl, bool) if ef else em) & dppw; ef = False")
    g.write_v_typed(dst, expr, dty, opsel_hi=dst_hi, zero_hi=_zeroes_hi(g, name, dty, dst_hi))
    g.emit("em, ef = em_s, ef_s")
    return
  if "sdwa" in f: return _sdwa_dst(g, inst, dst, expr, dty)
  g.write_v_typed(dst, expr, dty, opsel_hi=dst_hi, zero_hi=_zeroes_hi(g, name, dty, dst_hi))


# gfx9 16-bit VALU results clear the register's high half, but for the accumulating VOP2 forms (v_fmac/fmaak/fmamk/
# mac/madak/madmk_f16), which keep it, and a VOP3 result OP_SEL[3] puts in the high half; gfx10+ keep it always
# (LLVM GCNSubtarget::zeroesHigh16BitsOfDest, "derived from experimentation")
_GFX9_KEEPS_HI = frozenset(("v_fmac_f16", "v_fmaak_f16", "v_fmamk_f16", "v_mac_f16", "v_madak_f16", "v_madmk_f16"))


def _zeroes_hi(g: Gen, name: str, ty: str, dst_hi: bool) -> bool:
  return g.arch == "gfx942" and ty in HALF and not dst_hi and name not in _GFX9_KEEPS_HI


# gfx9 SDWA (MI300 ISA "SDWA"): SRC*_SEL / DST_SEL 0-3 = BYTE_0..3, 4/5 = WORD_0/1, 6 = DWORD; DST_UNUSED
# 0 = pad with zeros, 1 = sign-extend the result upwards, 2 = preserve the destination's other bits
def _sdwa_src(g: Gen, inst: Inst, i: int, code: int, ty: str) -> str:
  """Operand i (0: src0, 1: src1) of a gfx9 SDWA instruction: the selected byte/word of its dword, zero- or
  sign-extended (SRC*_SEXT), with the NEG/ABS modifiers of floats applied, as numpy type ty."""
  sd = inst.fields["sdwa"]
  sel, sext = sd[f"src{i}_sel"], sd[f"src{i}_sext"]
  raw = g.vsrc(code, inst, "u32")
  t = g.tmp()
  g.emit(f"{t} = R.sdwa_sel({raw}, {sel}, {bool(sext)})" if sel != 6 else f"{t} = np.asarray({raw}, u32)")
  e = t if ty in ("u32", "b32") else f"R.half({t}, False).view({NP_TYPE[ty]})" if ty in HALF else \
      f"{t}.view({NP_TYPE[ty]})" if ty not in WIDE else None
  if e is None: raise Unsupported(inst, 0, "64-bit SDWA operands")
  if ty in FLOATS:
    if sd.get(f"src{i}_abs"): e = f"np.abs({e})"
    if sd.get(f"src{i}_neg"): e = f"(-{e})"
  return e


def _sdwa_dst(g: Gen, inst: Inst, dst: int, expr: str, ty: str) -> None:
  sd = inst.fields["sdwa"]
  t = g.tmp()
  if ty in HALF: g.emit(f"{t} = np.asarray({expr}).astype({NP_TYPE[ty]}).view(u16).astype(u32)")
  elif ty == "f32": g.emit(f"{t} = R.f32bits({expr})")
  elif ty in WIDE: raise Unsupported(inst, 0, "64-bit SDWA results")
  else: g.emit(f"{t} = R.ibits({expr})")
  if sd["dst_sel"] == 6: return g.write_v(dst, t)
  g.write_v(dst, f"R.sdwa_dst({g.v(dst)}, {t}, {sd['dst_sel']}, {sd['dst_u']})")


def _dpp_src0(g: Gen, inst: Inst, code: int, ty: str, hi: bool) -> str:
  """src0 of a DPP16/DPP8 instruction: the VGPR's value read from other lanes (RDNA3 ISA "DPP16", "DPP8"); also
  sets `dppw`, the lanes that may be written."""
  d = inst.fields["dpp"]
  if code < 256: raise Unsupported(inst, 0, "DPP needs a VGPR src0")
  r = code - 256
  t = g.tmp()
  if d["kind"] == "dpp8":
    g.emit(f"{t}, dppw = R.dpp8({g.v(r)}, {d['lane_sel']}, {d['fi']}, em, ef)")
  else:
    g.emit(f"{t}, dppw = R.dpp16({g.v(r)}, {d['dpp_ctrl']}, {d['bc']}, {d.get('fi', 0)}, {d['row_mask']}, "
           f"{d['bank_mask']}, em, ef, {g.arch == 'gfx942'})")
  if ty in WIDE: raise Unsupported(inst, 0, "64-bit DPP")
  if ty in HALF: return f"R.half({t}, {hi}).view({NP_TYPE[ty]})"
  if ty in ("u32", "b32"): return t
  return f"{t}.view({ty})"


def _vopc(g: Gen, pc: int, inst: Inst, srcs, absm, negm, opsel) -> None:
  name, enc, f = inst.name, inst.encoding, inst.fields
  parts = name.split("_")  # v_cmp[x]_op_type
  cmpx = parts[1] == "cmpx"
  op, ty = parts[2], parts[3]
  sdwa = f.get("sdwa")
  def operand(i, t):
    if sdwa is not None: return _sdwa_src(g, inst, i, srcs[i], t)
    return g.vsrc(srcs[i], inst, t, bool(opsel >> i & 1))
  if op == "class":
    a = _src_mods(g, operand(0, ty), ty, 0, absm, negm)
    b = operand(1, "u32")
    expr = f"R.cmp_class({a}, {b})"
  else:
    table = CMP_F if ty in FLOATS else CMP_I
    if op not in table: raise Unsupported(inst, pc)
    a = _src_mods(g, operand(0, ty), ty, 0, absm, negm)
    b = _src_mods(g, operand(1, ty), ty, 1, absm, negm)
    expr = table[op].format(a, b)
  t = g.tmp()
  g.emit(f"{t} = R.bcast({expr}, nl)")
  if cmpx:
    g.write_exec(f"{t} if ef else ({t} & em)")
    return
  sdst = f["vdst"] if enc == "VOP3" else VCC
  if sdwa is not None and sdwa["sd"]: sdst = sdwa["sdst"]   # gfx9 VOPC SDWA: SD = 1 writes SDST instead of VCC
  g.write_lanes(sdst, t)


def _vop3p(g: Gen, pc: int, inst: Inst) -> None:
  name, f = inst.name, inst.fields
  if name in ("v_fma_mix_f32", "v_fma_mixlo_f16", "v_fma_mixhi_f16"):
    return _fma_mix(g, pc, inst)
  if name == "v_dot2_f32_f16":
    return _dot2(g, pc, inst)
  if name in ("v_dot4_i32_iu8", "v_dot4_u32_u8", "v_dot8_i32_iu4", "v_dot8_u32_u4"):
    # the IU forms take each operand's signedness from its NEG bit (RDNA3 ISA V_DOT4_I32_IU8)
    bits = 8 if "dot4" in name else 4
    iu = name.endswith(("iu8", "iu4"))
    sa, sb = (bool(f["neg"] & 1), bool(f["neg"] & 2)) if iu else (False, False)
    a, b = g.vsrc(f["src0"], inst, "u32"), g.vsrc(f["src1"], inst, "u32")
    c = g.vsrc(f["src2"], inst, "u32")
    return g.write_v(f["vdst"], f"R.dot_int({a}, {b}, {c}, {bits}, {sa}, {sb}, {iu})")
  if name in PACKED32: return _pk_f32(g, pc, inst)
  if name == "v_accvgpr_write_b32":   # MI300 ISA V_ACCVGPR_WRITE_B32: AccVGPR vdst = src0
    return g.write_v(ACC_BASE + f["vdst"], g.vsrc(f["src0"], inst, "u32"))
  if name == "v_accvgpr_read_b32":    # VGPR vdst = AccVGPR (src0 = 256 + its number)
    return g.write_v(f["vdst"], g.v(ACC_BASE + f["src0"] - 256))
  op = PACKED.get(name)
  if op is None: raise Unsupported(inst, pc)
  ety, arity, tmpl = op
  srcs = [f["src0"], f["src1"], f["src2"]]
  halves = []
  for hi_part in (False, True):
    args = []
    for i in range(arity):
      sel = (f["opsel_hi"] if hi_part else f["opsel"]) >> i & 1
      e = g.vsrc(srcs[i], inst, ety, bool(sel))
      if ety == "f16":
        negbits = f["neg_hi"] if hi_part else f["neg"]
        if negbits >> i & 1: e = f"(-{e})"
      args.append(e)
    r = g.tmp()
    g.emit(f"{r} = np.asarray({tmpl.format(*args)}).astype({ety})")
    if f["clamp"] and ety == "f16": g.emit(f"{r} = R.clamp01({r})")
    halves.append(r)
  g.write_v(f["vdst"], f"R.pack16({halves[0]}, {halves[1]})")


def _pk_f32(g: Gen, pc: int, inst: Inst) -> None:
  """CDNA3 packed 32-bit math on register pairs (MI300 ISA V_PK_FMA_F32, V_PK_MUL_F32, V_PK_ADD_F32, V_PK_MOV_B32):
  the low dword of D from the dwords of the sources that OP_SEL picks (0: low, 1: high dword of the pair), the high
  dword of D from those OP_SEL_HI picks; NEG / NEG_HI negate a source for the low / high result."""
  f = inst.fields
  ety, arity, tmpl = PACKED32[inst.name]
  srcs = [f["src0"], f["src1"], f["src2"]]
  halves = []
  for hi_part in (False, True):
    args = []
    for i in range(arity):
      sel = (f["opsel_hi"] if hi_part else f["opsel"]) >> i & 1
      code = srcs[i]
      if inst.name == "v_pk_mov_b32": sel = f["opsel"] >> i & 1   # D.lo = S0[opsel[0]], D.hi = S1[opsel[1]]
      e = g.vsrc(code + sel if (code >= 256 or code < 128) else code, inst, ety)
      if ety == "f32":
        if g.ftz["f32"][0]: e = f"R.ftz({e})"
        if (f["neg_hi"] if hi_part else f["neg"]) >> i & 1: e = f"(-{e})"
      args.append(e)
    r = g.tmp()
    if inst.name == "v_pk_mov_b32": g.emit(f"{r} = np.asarray({args[1 if hi_part else 0]}, u32)")
    else:
      g.emit(f"{r} = np.asarray({tmpl.format(*args)}).astype(f32)")
      if f["clamp"]: g.emit(f"{r} = R.clamp01({r})")
      if g.ftz["f32"][1]: g.emit(f"{r} = R.ftz({r})")
      g.emit(f"{r} = R.f32bits({r})")
    halves.append(r)
  g.write_v(f["vdst"], halves[0])
  g.write_v(f["vdst"] + 1, halves[1])


def _fma_mix(g: Gen, pc: int, inst: Inst) -> None:
  f = inst.fields
  srcs = [f["src0"], f["src1"], f["src2"]]
  args = []
  for i in range(3):
    if f["opsel_hi"] >> i & 1:   # f16 source, half chosen by opsel
      e = f"np.asarray({g.vsrc(srcs[i], inst, 'f16', bool(f['opsel'] >> i & 1))}, f32)"
    else:
      e = g.vsrc(srcs[i], inst, "f32")
    if f["neg_hi"] >> i & 1: e = f"np.abs({e})"
    if f["neg"] >> i & 1: e = f"(-{e})"
    args.append(e)
  r = g.tmp()
  g.emit(f"{r} = R.fma32({args[0]}, {args[1]}, {args[2]})")
  if f["clamp"]: g.emit(f"{r} = R.clamp01({r})")
  if inst.name == "v_fma_mix_f32": return g.write_v(f["vdst"], f"R.f32bits({r})")
  g.write_v(f["vdst"], f"R.put_half({g.v(f['vdst'])}, {r}.astype(f16), {inst.name == 'v_fma_mixhi_f16'})")


def _dot2(g: Gen, pc: int, inst: Inst) -> None:
  f = inst.fields
  a_lo, a_hi = (g.vsrc(f["src0"], inst, "f16", bool(f[k] & 1)) for k in ("opsel", "opsel_hi"))
  b_lo, b_hi = (g.vsrc(f["src1"], inst, "f16", bool(f[k] & 2)) for k in ("opsel", "opsel_hi"))
  c = g.vsrc(f["src2"], inst, "f32")
  g.write_v(f["vdst"], f"R.f32bits((np.asarray({a_lo}, f64) * {b_lo} + np.asarray({a_hi}, f64) * {b_hi} + {c}))")


def _vopd(g: Gen, pc: int, inst: Inst) -> None:
  f = inst.fields
  results = []
  for side in ("x", "y"):
    sub = DUAL.get(f["name" + side])
    if sub is None: raise Unsupported(inst, pc)
    s0, s1, dst = f["src0" + side], f["vsrc1" + side] + 256, f["vdst" + side]
    if sub == "v_cndmask_b32":
      expr = f"np.where({g.lane_mask_src(VCC, inst)}, {g.vsrc(s1, inst, 'u32')}, {g.vsrc(s0, inst, 'u32')})"
      results.append((dst, expr, "u32"))
      continue
    dty, stys, tmpl = OPS[sub]
    srcs = [s0, s1]
    if sub == "v_fmac_f32": srcs.append(dst + 256)
    if sub in ("v_fmaak_f32", "v_fmamk_f32"): srcs.append(LIT)
    args = [g.vsrc(srcs[i], inst, ty) for i, ty in enumerate(stys)]
    results.append((dst, tmpl.format(*args), dty))
  temps = []
  for dst, expr, ty in results:
    t = g.tmp()
    g.emit(f"{t} = {'R.f32bits' if ty == 'f32' else 'R.ibits'}({expr})")
    temps.append((dst, t))
  for dst, t in temps: g.write_v(dst, t)
