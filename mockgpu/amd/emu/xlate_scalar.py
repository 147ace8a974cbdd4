"""Translation of scalar instructions: SOPP (branches, barrier, end), SOP1/SOP2/SOPC/SOPK and SMEM loads.
Semantics: AMD "RDNA3 Instruction Set Architecture", chapters "Scalar ALU operations" and "Scalar memory"."""
from __future__ import annotations

from ....errors import GPUFault
from .decode import Inst
from .gen import EXEC, VCC, Gen, Unsupported

# ---- SOPP ----
def _sopp(g: Gen, pc: int, inst: Inst) -> None:
  name = inst.name
  simm = inst.fields["simm16"]
  target = pc + 4 + 4 * (simm - 0x10000 if simm & 0x8000 else simm)
  fall = pc + 4
  if name in ("s_endpgm", "s_endpgm_saved", "s_sethalt"):
    g.next_pc = "-1"
  elif name in ("s_barrier", "s_barrier_wait"):
    g.barrier = True
    g.next_pc = str(fall)
  elif name == "s_branch":
    g.next_pc = str(target)
  elif name.startswith("s_cbranch_"):
    cond = {"s_cbranch_scc0": f"{g.scc()} == 0", "s_cbranch_scc1": f"{g.scc()} != 0",
            "s_cbranch_vccz": f"~{g.mask_nonzero(VCC)}", "s_cbranch_vccnz": g.mask_nonzero(VCC),
            "s_cbranch_execz": f"~{g.mask_nonzero(EXEC)}", "s_cbranch_execnz": g.mask_nonzero(EXEC)}.get(name)
    if cond is None: raise Unsupported(inst, pc)
    g.emit(f"c = {cond}")
    g.next_pc = f"({target} if c.all() else {fall} if not c.any() else np.where(c, {target}, {fall}))"
  elif name == "s_code_end":
    raise GPUFault("executed s_code_end (the program ran past its end)", address=pc, kind="illegal instruction")
  elif name == "s_trap":
    raise GPUFault(f"s_trap {simm} executed", address=pc, kind="trap")
  else:
    raise Unsupported(inst, pc)


# ---- SALU ----
def _sdst64(g: Gen, r: int, expr: str) -> None:
  t = g.tmp()
  g.emit(f"{t} = np.asarray({expr}).astype(u64)")
  g.write_s(r, f"R.lo32({t})", exec_update=r != EXEC)   # EXEC's lanes are recomputed once, after both halves
  g.write_s(r + 1, f"({t} >> u64(32)).astype(u32)")


SOP2_32 = {  # name: (src types, expression, scc expression or None); {r} = result
  "s_add_u32": ("u64", "{0} + {1}", "{r} >> u64(32)"),
  "s_sub_u32": ("u64", "{0} - {1}", "{1} > {0}"),
  "s_add_i32": ("i64", "{0} + {1}", "({r} > 2147483647) | ({r} < -2147483648)"),
  "s_sub_i32": ("i64", "{0} - {1}", "({r} > 2147483647) | ({r} < -2147483648)"),
  "s_mul_i32": ("u32", "{0} * {1}", None),
  "s_mul_hi_u32": ("u32", "R.mul_hi_u32({0}, {1})", None),
  "s_mul_hi_i32": ("u32", "R.mul_hi_i32({0}, {1})", None),
  "s_and_b32": ("u32", "{0} & {1}", "{r} != 0"),
  "s_or_b32": ("u32", "{0} | {1}", "{r} != 0"),
  "s_xor_b32": ("u32", "{0} ^ {1}", "{r} != 0"),
  "s_nand_b32": ("u32", "~({0} & {1})", "{r} != 0"),
  "s_nor_b32": ("u32", "~({0} | {1})", "{r} != 0"),
  "s_xnor_b32": ("u32", "~({0} ^ {1})", "{r} != 0"),
  "s_and_not1_b32": ("u32", "{0} & ~np.asarray({1}, u32)", "{r} != 0"),
  "s_or_not1_b32": ("u32", "{0} | ~np.asarray({1}, u32)", "{r} != 0"),
  "s_lshl_b32": ("u32", "{0} << ({1} & u32(31))", "{r} != 0"),
  "s_lshr_b32": ("u32", "{0} >> ({1} & u32(31))", "{r} != 0"),
  "s_ashr_i32": ("u32", "(np.asarray({0}, u32).view(i32) >> np.asarray({1} & u32(31)).astype(i32)).view(u32)",
                 "{r} != 0"),
  "s_lshl1_add_u32": ("u64", "(({0} << u64(1)) & u64(0xFFFFFFFF)) + {1}", "{r} >> u64(32)"),
  "s_lshl2_add_u32": ("u64", "(({0} << u64(2)) & u64(0xFFFFFFFF)) + {1}", "{r} >> u64(32)"),
  "s_lshl3_add_u32": ("u64", "(({0} << u64(3)) & u64(0xFFFFFFFF)) + {1}", "{r} >> u64(32)"),
  "s_lshl4_add_u32": ("u64", "(({0} << u64(4)) & u64(0xFFFFFFFF)) + {1}", "{r} >> u64(32)"),
  "s_min_i32": ("i32", "np.minimum({0}, {1})", "{0} < {1}"),
  "s_max_i32": ("i32", "np.maximum({0}, {1})", "{0} > {1}"),
  "s_min_u32": ("u32", "np.minimum({0}, {1})", "{0} < {1}"),
  "s_max_u32": ("u32", "np.maximum({0}, {1})", "{0} > {1}"),
  "s_bfm_b32": ("u64", "((u64(1) << ({0} & u64(31))) - u64(1)) << ({1} & u64(31))", None),
  "s_bfe_u32": ("u32", "R.bfe_u({0}, {1}, {1} >> u32(16))", "{r} != 0"),
  "s_bfe_i32": ("u32", "R.bfe_i({0}, {1}, ({1} >> u32(16)) & u32(0x7F))", "{r} != 0"),
  "s_absdiff_i32": ("i64", "np.abs({0} - {1})", "{r} != 0"),
  "s_pack_ll_b32_b16": ("u32", "({0} & u32(0xFFFF)) | ({1} << u32(16))", None),
  "s_pack_lh_b32_b16": ("u32", "({0} & u32(0xFFFF)) | ({1} & u32(0xFFFF0000))", None),
  "s_pack_hh_b32_b16": ("u32", "({0} >> u32(16)) | ({1} & u32(0xFFFF0000))", None),
  "s_pack_hl_b32_b16": ("u32", "({0} >> u32(16)) | ({1} << u32(16))", None),
}
SOP2_64 = {
  "s_and_b64": "{0} & {1}", "s_or_b64": "{0} | {1}", "s_xor_b64": "{0} ^ {1}", "s_nand_b64": "~({0} & {1})",
  "s_nor_b64": "~({0} | {1})", "s_xnor_b64": "~({0} ^ {1})", "s_and_not1_b64": "{0} & ~{1}",
  "s_or_not1_b64": "{0} | ~{1}",
}
# RDNA4 scalar float ops (RDNA4 ISA "SALU floating point"): name -> expression over (S0, S1, D for fmac)
SALU_F32 = {"s_add_f32": "np.asarray({0}, f32) + {1}", "s_sub_f32": "np.asarray({0}, f32) - {1}",
            "s_mul_f32": "np.asarray({0}, f32) * {1}", "s_fmac_f32": "R.fma32({0}, {1}, {2})",
            "s_max_num_f32": "np.fmax({0}, {1})", "s_min_num_f32": "np.fmin({0}, {1})"}
SALU_CVT = {"s_cvt_f32_i32": ("i32", "np.asarray({0}).astype(f32)"), "s_cvt_f32_u32": ("u32", "np.asarray({0}).astype(f32)"),
            "s_cvt_i32_f32": ("f32", "R.cvt_f_to_i({0}, i32)"), "s_cvt_u32_f32": ("f32", "R.cvt_f_to_i({0}, u32)"),
            "s_ceil_f32": ("f32", "np.ceil({0})"), "s_floor_f32": ("f32", "np.floor({0})"),
            "s_trunc_f32": ("f32", "np.trunc({0})"), "s_rndne_f32": ("f32", "np.rint({0})")}
SOPC = {"eq": "==", "lg": "!=", "gt": ">", "ge": ">=", "lt": "<", "le": "<="}


# ---- SALU: one handler per family of instructions; SALU maps (encoding, mnemonic) to its handler (built below from
# the tables above), _salu looks it up: an instruction the table lacks is Unsupported.
def _sop2_32(g: Gen, pc: int, inst: Inst) -> None:
  f = inst.fields
  ty, expr, scc = SOP2_32[inst.name]
  a = g.raw_scalar(f["ssrc0"], inst, "u32")
  b = g.raw_scalar(f["ssrc1"], inst, "u32")
  if ty in ("u64", "i64", "i32"):
    a, b = f"np.asarray({a}).astype({ty})", f"np.asarray({b}).astype({ty})"
    if ty == "i64": a, b = f"np.asarray({g.raw_scalar(f['ssrc0'], inst, 'i32')}).astype(i64)", \
        f"np.asarray({g.raw_scalar(f['ssrc1'], inst, 'i32')}).astype(i64)"
    if ty == "i32": a, b = g.raw_scalar(f["ssrc0"], inst, "i32"), g.raw_scalar(f["ssrc1"], inst, "i32")
  r = g.tmp()
  g.emit(f"{r} = {expr.format(a, b)}")
  if scc: g.write_scc(scc.format(a, b, r=r))
  g.write_s(f["sdst"], f"np.asarray({r}).astype(u32)")


def _sop2_carry(g: Gen, pc: int, inst: Inst) -> None:
  """S_ADDC_U32 / S_SUBB_U32: SCC is the carry in and out."""
  f = inst.fields
  a = f"np.asarray({g.raw_scalar(f['ssrc0'], inst)}).astype(u64)"
  b = f"np.asarray({g.raw_scalar(f['ssrc1'], inst)}).astype(u64)"
  r = g.tmp()
  if inst.name == "s_addc_u32":
    g.emit(f"{r} = {a} + {b} + {g.scc()}.astype(u64)")
    g.write_scc(f"{r} >> u64(32)")
  else:
    g.emit(f"{r} = {a} - {b} - {g.scc()}.astype(u64)")
    g.write_scc(f"({b} + {g.scc()}.astype(u64)) > {a}")
  g.write_s(f["sdst"], f"R.lo32({r})")


def _cselect(g: Gen, pc: int, inst: Inst) -> None:
  f = inst.fields
  ty = "u64" if inst.name.endswith("64") else "u32"
  a, b = g.raw_scalar(f["ssrc0"], inst, ty), g.raw_scalar(f["ssrc1"], inst, ty)
  expr = f"np.where({g.scc()} != 0, {a}, {b})"
  if ty == "u64": _sdst64(g, f["sdst"], expr)
  else: g.write_s(f["sdst"], expr)


NC64 = {"s_add_nc_u64": "+", "s_sub_nc_u64": "-", "s_mul_u64": "*"}   # RDNA4 ISA S_ADD_NC_U64 etc.: no SCC


def _sop2_nc64(g: Gen, pc: int, inst: Inst) -> None:
  f = inst.fields
  a, b = g.raw_scalar(f["ssrc0"], inst, "u64"), g.raw_scalar(f["ssrc1"], inst, "u64")
  _sdst64(g, f["sdst"], f"np.asarray({a}, u64) {NC64[inst.name]} np.asarray({b}, u64)")


def _salu_f32(g: Gen, pc: int, inst: Inst) -> None:
  f = inst.fields
  a, b = g.raw_scalar(f["ssrc0"], inst, "f32"), g.raw_scalar(f["ssrc1"], inst, "f32")
  c = g.raw_scalar(f["sdst"], inst, "f32") if inst.name == "s_fmac_f32" else None
  g.write_s(f["sdst"], f"R.f32bits({SALU_F32[inst.name].format(a, b, c)})")


def _sop2_64(g: Gen, pc: int, inst: Inst) -> None:
  f = inst.fields
  a, b = g.raw_scalar(f["ssrc0"], inst, "u64"), g.raw_scalar(f["ssrc1"], inst, "u64")
  r = g.tmp()
  g.emit(f"{r} = np.asarray({SOP2_64[inst.name].format(a, b)}, u64)")
  g.write_scc(f"{r} != 0")
  _sdst64(g, f["sdst"], r)


SHIFT64 = {"s_lshl_b64": "np.asarray({a}, u64) << {sh}", "s_lshr_b64": "np.asarray({a}, u64) >> {sh}",
           "s_ashr_i64": "(np.asarray({a}, u64).view(i64) >> {sh}.astype(i64)).view(u64)"}


def _shift64(g: Gen, pc: int, inst: Inst) -> None:
  f = inst.fields
  a, b = g.raw_scalar(f["ssrc0"], inst, "u64"), g.raw_scalar(f["ssrc1"], inst, "u32")
  r = g.tmp()
  g.emit(f"{r} = {SHIFT64[inst.name].format(a=a, sh=f'(np.asarray({b}, u64) & u64(63))')}")
  g.write_scc(f"{r} != 0")
  _sdst64(g, f["sdst"], r)


def _bfe64(g: Gen, pc: int, inst: Inst) -> None:
  """S_BFE_U64 / S_BFE_I64: S1[5:0] = offset, S1[22:16] = width (RDNA3 ISA)."""
  f = inst.fields
  a = f"np.asarray({g.raw_scalar(f['ssrc0'], inst, 'u64')}, u64)"
  b = f"np.asarray({g.raw_scalar(f['ssrc1'], inst)}, u64)"
  r = g.tmp()
  g.emit(f"{r}o = {b} & u64(63); {r}w = np.minimum(({b} >> u64(16)) & u64(0x7F), u64(64))")
  g.emit(f"{r} = ({a} >> {r}o) & np.where({r}w >= 64, u64(0xFFFFFFFFFFFFFFFF), (u64(1) << ({r}w & u64(63))) - u64(1))")
  if inst.name == "s_bfe_i64":
    g.emit(f"{r} = np.where(({r}w > 0) & ({r}w < 64), ((({r} << (u64(64) - {r}w)).view(i64)) >> "
           f"(i64(64) - {r}w.astype(i64))).view(u64), {r})")
  g.write_scc(f"{r} != 0")
  _sdst64(g, f["sdst"], r)


def _bfm64(g: Gen, pc: int, inst: Inst) -> None:
  f = inst.fields
  a, b = g.raw_scalar(f["ssrc0"], inst), g.raw_scalar(f["ssrc1"], inst)
  w = f"(np.asarray({a}, u64) & u64(63))"
  _sdst64(g, f["sdst"], f"((u64(1) << {w}) - u64(1)) << (np.asarray({b}, u64) & u64(63))")


def _cmp(g: Gen, pc: int, inst: Inst) -> None:
  """S_CMP_<op>_<type> (SOPC): SCC = S0 op S1."""
  f = inst.fields
  _, _, op, ty = inst.name.split("_")
  a, b = g.raw_scalar(f["ssrc0"], inst, ty), g.raw_scalar(f["ssrc1"], inst, ty)
  g.write_scc(f"{a} {SOPC[op]} {b}")


def _bitcmp(g: Gen, pc: int, inst: Inst) -> None:
  """S_BITCMP0/1_B32/B64: SCC = (bit S1 of S0) == 0 / 1."""
  f, want = inst.fields, 1 if inst.name.startswith("s_bitcmp1") else 0
  if inst.name.endswith("64"):
    a, b = g.raw_scalar(f["ssrc0"], inst, "u64"), g.raw_scalar(f["ssrc1"], inst)
    return g.write_scc(f"(((np.asarray({a}, u64) >> (np.asarray({b}, u64) & u64(63))) & u64(1)) == {want})")
  a, b = g.raw_scalar(f["ssrc0"], inst), g.raw_scalar(f["ssrc1"], inst)
  g.write_scc(f"((({a} >> ({b} & u32(31))) & u32(1)) == {want})")


def _simm(inst: Inst) -> tuple[int, int]:
  """SOPK's 16-bit immediate, and sign-extended."""
  simm = inst.fields["simm16"]
  return simm, simm - 0x10000 if simm & 0x8000 else simm


def _movk(g: Gen, pc: int, inst: Inst) -> None:
  g.write_s(inst.fields["sdst"], g.const(_simm(inst)[1] & 0xFFFFFFFF, "u32"))


def _cmovk(g: Gen, pc: int, inst: Inst) -> None:
  d = inst.fields["sdst"]
  g.write_s(d, f"np.where({g.scc()} != 0, {g.const(_simm(inst)[1] & 0xFFFFFFFF, 'u32')}, {g.s(d)})")


def _cmpk(g: Gen, pc: int, inst: Inst) -> None:
  """S_CMPK_<op>_<type>: SCC = D op the immediate (sign-extended for i32)."""
  simm, sext = _simm(inst)
  _, _, op, ty = inst.name.split("_")
  k = g.const(sext if ty == "i32" else simm, ty)
  g.write_scc(f"{g.raw_scalar(inst.fields['sdst'], inst, ty)} {SOPC[op]} {k}")


def _addk(g: Gen, pc: int, inst: Inst) -> None:
  d, r = inst.fields["sdst"], g.tmp()
  g.emit(f"{r} = {g.raw_scalar(d, inst, 'i32')}.astype(i64) + {_simm(inst)[1]}")
  g.write_scc(f"({r} > 2147483647) | ({r} < -2147483648)")
  g.write_s(d, f"{r}.astype(u32)")


def _mulk(g: Gen, pc: int, inst: Inst) -> None:
  d = inst.fields["sdst"]
  g.write_s(d, f"{g.s(d)} * {g.const(_simm(inst)[1] & 0xFFFFFFFF, 'u32')}")


def _getreg_b32(g: Gen, pc: int, inst: Inst) -> None:
  g.write_s(inst.fields["sdst"], _getreg(g, inst.fields["simm16"]))


def _nothing(g: Gen, pc: int, inst: Inst) -> None:
  """S_SETREG_B32 / S_SETREG_IMM32_B32 (mode bits are not modelled), S_VERSION."""


def _mov32(g: Gen, pc: int, inst: Inst) -> None:
  g.write_s(inst.fields["sdst"], g.raw_scalar(inst.fields["ssrc0"], inst))


def _cvt(g: Gen, pc: int, inst: Inst) -> None:
  name = inst.name
  ty, expr = SALU_CVT[name]
  r = g.tmp()
  g.emit(f"{r} = np.asarray({expr.format(g.raw_scalar(inst.fields['ssrc0'], inst, ty))})")
  to_float = name.startswith("s_cvt_f32") or not name.startswith("s_cvt")
  g.write_s(inst.fields["sdst"], f"R.f32bits({r})" if to_float else f"R.ibits({r})")


def _mov64(g: Gen, pc: int, inst: Inst) -> None:
  _sdst64(g, inst.fields["sdst"], g.raw_scalar(inst.fields["ssrc0"], inst, "u64"))


def _cmov32(g: Gen, pc: int, inst: Inst) -> None:
  d = inst.fields["sdst"]
  g.write_s(d, f"np.where({g.scc()} != 0, {g.raw_scalar(inst.fields['ssrc0'], inst)}, {g.s(d)})")


def _cmov64(g: Gen, pc: int, inst: Inst) -> None:
  d = inst.fields["sdst"]
  _sdst64(g, d, f"np.where({g.scc()} != 0, {g.raw_scalar(inst.fields['ssrc0'], inst, 'u64')}, "
                f"R.p64({g.s(d)}, {g.s(d + 1)}))")


# SOP1 on 32 bits: name -> (expression of S0 = {0}, whether SCC = result != 0)
SOP1_32 = {"s_not_b32": ("~np.asarray({0}, u32)", True), "s_brev_b32": ("R.brev32({0})", False),
           "s_bcnt0_i32_b32": ("u32(32) - R.popcount({0})", True), "s_bcnt1_i32_b32": ("R.popcount({0})", True),
           "s_ctz_i32_b32": ("R.ctz32({0})", False), "s_clz_i32_u32": ("R.clz32({0})", False),
           "s_sext_i32_i8": ("np.asarray({0}, u32).astype(u8).view(i8).astype(i32).view(u32)", False),
           "s_sext_i32_i16": ("np.asarray({0}, u32).astype(u16).view(i16).astype(i32).view(u32)", False),
           "s_abs_i32": ("np.abs(np.asarray({0}, u32).view(i32)).view(u32)", True),
           "s_wqm_b32": ("R.wqm({0})", True), "s_quadmask_b32": ("R.quadmask({0})", True)}


def _sop1_32(g: Gen, pc: int, inst: Inst) -> None:
  expr, scc = SOP1_32[inst.name]
  a = g.raw_scalar(inst.fields["ssrc0"], inst)
  r = g.tmp()
  g.emit(f"{r} = np.asarray({expr.format(a)}).astype(u32)")
  if scc: g.write_scc(f"{r} != 0")
  g.write_s(inst.fields["sdst"], r)


# SOP1 with a 64-bit (s_cls_i32: 32-bit signed) source and a 32-bit count: name -> expression of S0 = {0}
SOP1_COUNT64 = {"s_bcnt0_i32_b64": "u32(64) - R.popcount(np.asarray({0}, u64))",
                "s_bcnt1_i32_b64": "R.popcount(np.asarray({0}, u64))",
                "s_ctz_i32_b64": "R.ctz64({0})", "s_clz_i32_u64": "R.clz64({0})", "s_cls_i32": "R.cls32({0})"}


def _count64(g: Gen, pc: int, inst: Inst) -> None:
  name = inst.name
  a = g.raw_scalar(inst.fields["ssrc0"], inst, "i32" if name == "s_cls_i32" else "u64")
  r = g.tmp()
  g.emit(f"{r} = np.asarray({SOP1_COUNT64[name].format(a)}).astype(u32)")
  if name.startswith("s_bcnt"): g.write_scc(f"{r} != 0")
  g.write_s(inst.fields["sdst"], r)


def _brev64(g: Gen, pc: int, inst: Inst) -> None:
  a = g.raw_scalar(inst.fields["ssrc0"], inst, "u64")
  r = g.tmp()
  g.emit(f"{r} = np.asarray({a}, u64)")
  g.emit(f"{r} = (R.brev32(R.lo32({r})).astype(u64) << u64(32)) | R.brev32(({r} >> u64(32)).astype(u32)).astype(u64)")
  _sdst64(g, inst.fields["sdst"], r)


def _bitset64(g: Gen, pc: int, inst: Inst) -> None:
  d = inst.fields["sdst"]
  bit = f"(u64(1) << (np.asarray({g.raw_scalar(inst.fields['ssrc0'], inst)}, u64) & u64(63)))"
  cur = f"R.p64({g.s(d)}, {g.s(d + 1)})"
  _sdst64(g, d, f"{cur} & ~{bit}" if inst.name == "s_bitset0_b64" else f"{cur} | {bit}")


def _not64(g: Gen, pc: int, inst: Inst) -> None:
  r = g.tmp()
  g.emit(f"{r} = ~np.asarray({g.raw_scalar(inst.fields['ssrc0'], inst, 'u64')}, u64)")
  g.write_scc(f"{r} != 0")
  _sdst64(g, inst.fields["sdst"], r)


def _bitset32(g: Gen, pc: int, inst: Inst) -> None:
  d = inst.fields["sdst"]
  bit = f"(u32(1) << ({g.raw_scalar(inst.fields['ssrc0'], inst)} & u32(31)))"
  g.write_s(d, f"{g.s(d)} & ~{bit}" if inst.name == "s_bitset0_b32" else f"{g.s(d)} | {bit}")


def _saveexec64(g: Gen, pc: int, inst: Inst) -> None:
  """wave64 (MI300 ISA S_AND_SAVEEXEC_B64 etc.): D = EXEC; EXEC = op(S0, EXEC); SCC = EXEC != 0 (wrexec: D = EXEC)."""
  name, d = inst.name, inst.fields["sdst"]
  a = f"np.asarray({g.raw_scalar(inst.fields['ssrc0'], inst, 'u64')}, u64)"
  e = f"R.p64({g.s(EXEC)}, {g.s(EXEC + 1)})"
  old, r = g.tmp(), g.tmp()
  g.emit(f"{old} = {e}")
  g.emit(f"{r} = np.asarray({_EXEC_OPS[name[2:-4]].format(a=a, e=old)}, u64)")
  _sdst64(g, EXEC, r)
  g.write_scc(f"{r} != 0")
  _sdst64(g, d, r if "wrexec" in name else old)


def _saveexec32(g: Gen, pc: int, inst: Inst) -> None:
  name, d = inst.name, inst.fields["sdst"]
  a = g.raw_scalar(inst.fields["ssrc0"], inst)
  e = g.s(EXEC)
  old, r = g.tmp(), g.tmp()
  g.emit(f"{old} = {e}")
  g.emit(f"{r} = np.asarray({_EXEC_OPS32[name[2:-4]].format(a=a, e=e)}).astype(u32)")
  g.write_s(EXEC, r)
  g.write_scc(f"{r} != 0")
  g.write_s(d, r if "wrexec" in name else old)


def _getpc(g: Gen, pc: int, inst: Inst) -> None:
  _sdst64(g, inst.fields["sdst"], g.const(pc + 4, "u64"))


def _setpc(g: Gen, pc: int, inst: Inst) -> None:
  """S_SETPC_B64 / S_SWAPPC_B64 (D = the return address): a branch to S0's address, per lane when they differ."""
  src, target = inst.fields["ssrc0"], g.tmp()
  lo, hi = g.raw_scalar(src, inst), g.raw_scalar(src + 1, inst) if src < 128 else g.const(0, "u32")
  g.emit(f"{target} = np.broadcast_to(R.p64({lo}, {hi}).astype(i64), (n,))")
  if inst.name == "s_swappc_b64": _sdst64(g, inst.fields["sdst"], g.const(pc + 4, "u64"))
  g.next_pc = f"(int({target}[0]) if ({target} == {target}[0]).all() else {target})"


_EXEC_OPS = {"and_saveexec": "{a} & {e}", "or_saveexec": "{a} | {e}", "xor_saveexec": "{a} ^ {e}",
             "nand_saveexec": "~({a} & {e})", "nor_saveexec": "~({a} | {e})", "xnor_saveexec": "~({a} ^ {e})",
             "and_not0_saveexec": "~{a} & {e}", "or_not0_saveexec": "~{a} | {e}", "and_not1_saveexec": "{a} & ~{e}",
             "or_not1_saveexec": "{a} | ~{e}", "and_not0_wrexec": "~{a} & {e}", "and_not1_wrexec": "{a} & ~{e}"}
# the 32-bit forms: S0 is a raw scalar expression, its complement taken as u32
_EXEC_OPS32 = {**_EXEC_OPS, "and_not0_saveexec": "~np.asarray({a}, u32) & {e}",
               "or_not0_saveexec": "~np.asarray({a}, u32) | {e}", "and_not0_wrexec": "~np.asarray({a}, u32) & {e}"}


def _salu_table() -> dict:
  t = {}
  def add(enc, names, handler):
    for n in names: t[(enc, n)] = handler
  add("SOP2", SOP2_32, _sop2_32)
  add("SOP2", ("s_addc_u32", "s_subb_u32"), _sop2_carry)
  add("SOP2", ("s_cselect_b32", "s_cselect_b64"), _cselect)
  add("SOP2", NC64, _sop2_nc64)
  add("SOP2", SALU_F32, _salu_f32)
  add("SOP2", SOP2_64, _sop2_64)
  add("SOP2", SHIFT64, _shift64)
  add("SOP2", ("s_bfe_u64", "s_bfe_i64"), _bfe64)
  add("SOP2", ("s_bfm_b64",), _bfm64)
  add("SOPC", (f"s_cmp_{op}_{ty}" for op in SOPC for ty in ("i32", "u32")), _cmp)
  add("SOPC", ("s_cmp_eq_u64", "s_cmp_lg_u64"), _cmp)
  add("SOPC", ("s_bitcmp0_b32", "s_bitcmp1_b32", "s_bitcmp0_b64", "s_bitcmp1_b64"), _bitcmp)
  add("SOPK", ("s_movk_i32",), _movk)
  add("SOPK", ("s_cmovk_i32",), _cmovk)
  add("SOPK", (f"s_cmpk_{op}_{ty}" for op in SOPC for ty in ("i32", "u32")), _cmpk)
  add("SOPK", ("s_addk_i32",), _addk)
  add("SOPK", ("s_mulk_i32",), _mulk)
  add("SOPK", ("s_getreg_b32",), _getreg_b32)
  add("SOPK", ("s_setreg_b32", "s_setreg_imm32_b32", "s_version"), _nothing)
  add("SOP1", ("s_mov_b32",), _mov32)
  add("SOP1", SALU_CVT, _cvt)
  add("SOP1", ("s_mov_b64",), _mov64)
  add("SOP1", ("s_cmov_b32",), _cmov32)
  add("SOP1", ("s_cmov_b64",), _cmov64)
  add("SOP1", SOP1_32, _sop1_32)
  add("SOP1", SOP1_COUNT64, _count64)
  add("SOP1", ("s_brev_b64",), _brev64)
  add("SOP1", ("s_bitset0_b64", "s_bitset1_b64"), _bitset64)
  add("SOP1", ("s_not_b64",), _not64)
  add("SOP1", ("s_bitset0_b32", "s_bitset1_b32"), _bitset32)
  add("SOP1", (f"s_{op}_b64" for op in _EXEC_OPS), _saveexec64)
  add("SOP1", (f"s_{op}_b32" for op in _EXEC_OPS32), _saveexec32)
  add("SOP1", ("s_getpc_b64",), _getpc)
  add("SOP1", ("s_setpc_b64", "s_swappc_b64"), _setpc)
  return t


SALU = _salu_table()


def _salu(g: Gen, pc: int, inst: Inst) -> None:
  handler = SALU.get((inst.encoding, inst.name))
  if handler is None: raise Unsupported(inst, pc)
  handler(g, pc, inst)


def _getreg(g: Gen, simm: int) -> str:
  """S_GETREG_B32 hwreg(id, offset, size): the wave-id registers are not modelled beyond HW_ID fields of 0;
  MODE reads its reset value."""
  reg, off, size = simm & 0x3F, (simm >> 6) & 0x1F, ((simm >> 11) & 0x1F) + 1
  value = 0
  if reg == 1: value = 0x000003F0  # MODE: denorm modes allow denormals (ISA reset value for compute)
  return g.const((value >> off) & ((1 << size) - 1), "u32")


# ---- SMEM ----
def _smem(g: Gen, pc: int, inst: Inst) -> None:
  name, f = inst.name, inst.fields
  if not name.startswith("s_load_"): raise Unsupported(inst, pc)
  kind = name.split("_")[-1]
  base = f["sbase"] * 2
  off = f["offset"]        # a signed byte offset, plus the SGPR soffset (-1: none): see decode._smem_offsets
  addr = f"(R.p64({g.s(base)}, {g.s(base + 1)}).astype(i64) + {off})"
  if f["soffset"] >= 0: addr = f"({addr} + {g.s(f['soffset'])}.astype(i64))"
  t = g.tmp()
  if kind in ("u8", "i8", "u16", "i16"):
    # RDNA4 S_LOAD_U8/I8/U16/I16: one byte or short at the byte address, zero- or sign-extended
    g.emit(f"{t} = M.sload_sub({addr}.astype(u64), {int(kind[1:]) // 8}, {kind[0] == 'i'})")
    return g.write_s(f["sdata"], t)
  ndw = {"b32": 1, "b64": 2, "b96": 3, "b128": 4, "b256": 8, "b512": 16}[kind]
  g.emit(f"{t} = M.sload({addr}.astype(u64), {ndw})")
  for k in range(ndw): g.write_s(f["sdata"] + k, f"{t}[{k}]")
