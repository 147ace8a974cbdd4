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


def _salu(g: Gen, pc: int, inst: Inst) -> None:
  name, enc, f = inst.name, inst.encoding, inst.fields
  if enc == "SOP2":
    if name in SOP2_32:
      ty, expr, scc = SOP2_32[name]
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
      return
    if name in ("s_addc_u32", "s_subb_u32"):
      a = f"np.asarray({g.raw_scalar(f['ssrc0'], inst)}).astype(u64)"
      b = f"np.asarray({g.raw_scalar(f['ssrc1'], inst)}).astype(u64)"
      r = g.tmp()
      if name == "s_addc_u32":
        g.emit(f"{r} = {a} + {b} + {g.scc()}.astype(u64)")
        g.write_scc(f"{r} >> u64(32)")
      else:
        g.emit(f"{r} = {a} - {b} - {g.scc()}.astype(u64)")
        g.write_scc(f"({b} + {g.scc()}.astype(u64)) > {a}")
      g.write_s(f["sdst"], f"R.lo32({r})")
      return
    if name in ("s_cselect_b32", "s_cselect_b64"):
      ty = "u64" if name.endswith("64") else "u32"
      a, b = g.raw_scalar(f["ssrc0"], inst, ty), g.raw_scalar(f["ssrc1"], inst, ty)
      expr = f"np.where({g.scc()} != 0, {a}, {b})"
      if ty == "u64": _sdst64(g, f["sdst"], expr)
      else: g.write_s(f["sdst"], expr)
      return
    if name in ("s_add_nc_u64", "s_sub_nc_u64", "s_mul_u64"):
      # RDNA4: 64-bit integer add/sub/multiply of SGPR pairs, no SCC (RDNA4 ISA S_ADD_NC_U64 etc.)
      a, b = g.raw_scalar(f["ssrc0"], inst, "u64"), g.raw_scalar(f["ssrc1"], inst, "u64")
      op = {"s_add_nc_u64": "+", "s_sub_nc_u64": "-", "s_mul_u64": "*"}[name]
      return _sdst64(g, f["sdst"], f"np.asarray({a}, u64) {op} np.asarray({b}, u64)")
    if name in SALU_F32:
      a, b = g.raw_scalar(f["ssrc0"], inst, "f32"), g.raw_scalar(f["ssrc1"], inst, "f32")
      c = g.raw_scalar(f["sdst"], inst, "f32") if name == "s_fmac_f32" else None
      return g.write_s(f["sdst"], f"R.f32bits({SALU_F32[name].format(a, b, c)})")
    if name in SOP2_64:
      a, b = g.raw_scalar(f["ssrc0"], inst, "u64"), g.raw_scalar(f["ssrc1"], inst, "u64")
      r = g.tmp()
      g.emit(f"{r} = np.asarray({SOP2_64[name].format(a, b)}, u64)")
      g.write_scc(f"{r} != 0")
      _sdst64(g, f["sdst"], r)
      return
    if name in ("s_lshl_b64", "s_lshr_b64", "s_ashr_i64"):
      a, b = g.raw_scalar(f["ssrc0"], inst, "u64"), g.raw_scalar(f["ssrc1"], inst, "u32")
      sh = f"(np.asarray({b}, u64) & u64(63))"
      expr = {"s_lshl_b64": f"np.asarray({a}, u64) << {sh}", "s_lshr_b64": f"np.asarray({a}, u64) >> {sh}",
              "s_ashr_i64": f"(np.asarray({a}, u64).view(i64) >> {sh}.astype(i64)).view(u64)"}[name]
      r = g.tmp()
      g.emit(f"{r} = {expr}")
      g.write_scc(f"{r} != 0")
      _sdst64(g, f["sdst"], r)
      return
    if name in ("s_bfe_u64", "s_bfe_i64"):
      # S1[5:0] = offset, S1[22:16] = width (RDNA3 ISA S_BFE_U64/I64)
      a = f"np.asarray({g.raw_scalar(f['ssrc0'], inst, 'u64')}, u64)"
      b = f"np.asarray({g.raw_scalar(f['ssrc1'], inst)}, u64)"
      r = g.tmp()
      g.emit(f"{r}o = {b} & u64(63); {r}w = np.minimum(({b} >> u64(16)) & u64(0x7F), u64(64))")
      g.emit(f"{r} = ({a} >> {r}o) & np.where({r}w >= 64, u64(0xFFFFFFFFFFFFFFFF), (u64(1) << ({r}w & u64(63))) - u64(1))")
      if name == "s_bfe_i64":
        g.emit(f"{r} = np.where(({r}w > 0) & ({r}w < 64), ((({r} << (u64(64) - {r}w)).view(i64)) >> "
               f"(i64(64) - {r}w.astype(i64))).view(u64), {r})")
      g.write_scc(f"{r} != 0")
      return _sdst64(g, f["sdst"], r)
    if name == "s_bfm_b64":
      a, b = g.raw_scalar(f["ssrc0"], inst), g.raw_scalar(f["ssrc1"], inst)
      w = f"(np.asarray({a}, u64) & u64(63))"
      return _sdst64(g, f["sdst"], f"((u64(1) << {w}) - u64(1)) << (np.asarray({b}, u64) & u64(63))")
    raise Unsupported(inst, pc)
  if enc == "SOPC":
    parts = name.split("_")  # s_cmp_eq_u32
    if name.startswith("s_cmp_"):
      op, ty = parts[2], parts[3]
      t = {"i32": "i32", "u32": "u32", "u64": "u64"}[ty]
      a, b = g.raw_scalar(f["ssrc0"], inst, t), g.raw_scalar(f["ssrc1"], inst, t)
      g.write_scc(f"{a} {SOPC[op]} {b}")
      return
    if name in ("s_bitcmp0_b64", "s_bitcmp1_b64"):
      a, b = g.raw_scalar(f["ssrc0"], inst, "u64"), g.raw_scalar(f["ssrc1"], inst)
      g.write_scc(f"(((np.asarray({a}, u64) >> (np.asarray({b}, u64) & u64(63))) & u64(1)) == "
                  f"{1 if name.startswith('s_bitcmp1') else 0})")
      return
    if name in ("s_bitcmp0_b32", "s_bitcmp1_b32"):
      a, b = g.raw_scalar(f["ssrc0"], inst), g.raw_scalar(f["ssrc1"], inst)
      g.write_scc(f"((({a} >> ({b} & u32(31))) & u32(1)) == {1 if name.endswith('1_b32') else 0})")
      return
    raise Unsupported(inst, pc)
  if enc == "SOPK":
    simm = f["simm16"]
    sext = simm - 0x10000 if simm & 0x8000 else simm
    d = f["sdst"]
    if name == "s_movk_i32": return g.write_s(d, g.const(sext & 0xFFFFFFFF, "u32"))
    if name == "s_cmovk_i32":
      return g.write_s(d, f"np.where({g.scc()} != 0, {g.const(sext & 0xFFFFFFFF, 'u32')}, {g.s(d)})")
    if name.startswith("s_cmpk_"):
      op, ty = name.split("_")[2], name.split("_")[3]
      k = g.const(sext if ty == "i32" else simm, ty)
      g.write_scc(f"{g.raw_scalar(d, inst, ty)} {SOPC[op]} {k}")
      return
    if name == "s_addk_i32":
      r = g.tmp()
      g.emit(f"{r} = {g.raw_scalar(d, inst, 'i32')}.astype(i64) + {sext}")
      g.write_scc(f"({r} > 2147483647) | ({r} < -2147483648)")
      return g.write_s(d, f"{r}.astype(u32)")
    if name == "s_mulk_i32": return g.write_s(d, f"{g.s(d)} * {g.const(sext & 0xFFFFFFFF, 'u32')}")
    if name == "s_getreg_b32": return g.write_s(d, _getreg(g, simm))
    if name in ("s_setreg_b32", "s_setreg_imm32_b32"): return   # mode bits are not modelled
    if name == "s_version": return
    raise Unsupported(inst, pc)
  # SOP1
  d = f["sdst"]
  src = f["ssrc0"]
  if name == "s_mov_b32": return g.write_s(d, g.raw_scalar(src, inst))
  if name in SALU_CVT:
    ty, expr = SALU_CVT[name]
    r = g.tmp()
    g.emit(f"{r} = np.asarray({expr.format(g.raw_scalar(src, inst, ty))})")
    to_float = name.startswith("s_cvt_f32") or not name.startswith("s_cvt")
    return g.write_s(d, f"R.f32bits({r})" if to_float else f"R.ibits({r})")
  if name == "s_mov_b64": return _sdst64(g, d, g.raw_scalar(src, inst, "u64"))
  if name == "s_cmov_b32": return g.write_s(d, f"np.where({g.scc()} != 0, {g.raw_scalar(src, inst)}, {g.s(d)})")
  if name == "s_cmov_b64":
    return _sdst64(g, d, f"np.where({g.scc()} != 0, {g.raw_scalar(src, inst, 'u64')}, "
                         f"R.p64({g.s(d)}, {g.s(d + 1)}))")
  if name in ("s_not_b32", "s_brev_b32", "s_bcnt0_i32_b32", "s_bcnt1_i32_b32", "s_ctz_i32_b32", "s_clz_i32_u32",
              "s_sext_i32_i8", "s_sext_i32_i16", "s_abs_i32", "s_quadmask_b32", "s_wqm_b32"):
    a = g.raw_scalar(src, inst)
    expr = {"s_not_b32": f"~np.asarray({a}, u32)", "s_brev_b32": f"R.brev32({a})",
            "s_bcnt0_i32_b32": f"u32(32) - R.popcount({a})", "s_bcnt1_i32_b32": f"R.popcount({a})",
            "s_ctz_i32_b32": f"R.ctz32({a})", "s_clz_i32_u32": f"R.clz32({a})",
            "s_sext_i32_i8": f"np.asarray({a}, u32).astype(u8).view(i8).astype(i32).view(u32)",
            "s_sext_i32_i16": f"np.asarray({a}, u32).astype(u16).view(i16).astype(i32).view(u32)",
            "s_abs_i32": f"np.abs(np.asarray({a}, u32).view(i32)).view(u32)",
            "s_wqm_b32": f"R.wqm({a})", "s_quadmask_b32": f"R.quadmask({a})"}[name]
    r = g.tmp()
    g.emit(f"{r} = np.asarray({expr}).astype(u32)")
    if name in ("s_not_b32", "s_bcnt0_i32_b32", "s_bcnt1_i32_b32", "s_abs_i32", "s_wqm_b32", "s_quadmask_b32"):
      g.write_scc(f"{r} != 0")
    return g.write_s(d, r)
  if name in ("s_brev_b64", "s_bcnt0_i32_b64", "s_bcnt1_i32_b64", "s_ctz_i32_b64", "s_clz_i32_u64", "s_cls_i32"):
    a = g.raw_scalar(src, inst, "i32" if name == "s_cls_i32" else "u64")
    r = g.tmp()
    if name == "s_brev_b64":
      g.emit(f"{r} = np.asarray({a}, u64)")
      g.emit(f"{r} = (R.brev32(R.lo32({r})).astype(u64) << u64(32)) | R.brev32(({r} >> u64(32)).astype(u32)).astype(u64)")
      return _sdst64(g, d, r)
    expr = {"s_bcnt0_i32_b64": f"u32(64) - R.popcount(np.asarray({a}, u64))",
            "s_bcnt1_i32_b64": f"R.popcount(np.asarray({a}, u64))",
            "s_ctz_i32_b64": f"R.ctz64({a})", "s_clz_i32_u64": f"R.clz64({a})", "s_cls_i32": f"R.cls32({a})"}[name]
    g.emit(f"{r} = np.asarray({expr}).astype(u32)")
    if name.startswith("s_bcnt"): g.write_scc(f"{r} != 0")
    return g.write_s(d, r)
  if name in ("s_bitset0_b64", "s_bitset1_b64"):
    bit = f"(u64(1) << (np.asarray({g.raw_scalar(src, inst)}, u64) & u64(63)))"
    cur = f"R.p64({g.s(d)}, {g.s(d + 1)})"
    return _sdst64(g, d, f"{cur} & ~{bit}" if name == "s_bitset0_b64" else f"{cur} | {bit}")
  if name in ("s_not_b64",):
    r = g.tmp()
    g.emit(f"{r} = ~np.asarray({g.raw_scalar(src, inst, 'u64')}, u64)")
    g.write_scc(f"{r} != 0")
    return _sdst64(g, d, r)
  if name in ("s_bitset0_b32", "s_bitset1_b32"):
    bit = f"(u32(1) << ({g.raw_scalar(src, inst)} & u32(31)))"
    expr = f"{g.s(d)} & ~{bit}" if name == "s_bitset0_b32" else f"{g.s(d)} | {bit}"
    return g.write_s(d, expr)
  if name.endswith(("saveexec_b64", "wrexec_b64")):
    # wave64 (MI300 ISA S_AND_SAVEEXEC_B64 etc.): D = EXEC; EXEC = op(S0, EXEC); SCC = EXEC != 0 (wrexec: D = EXEC)
    a = f"np.asarray({g.raw_scalar(src, inst, 'u64')}, u64)"
    e = f"R.p64({g.s(EXEC)}, {g.s(EXEC + 1)})"
    expr = _EXEC_OPS.get(name[2:-4])
    if expr is None: raise Unsupported(inst, pc)
    old, r = g.tmp(), g.tmp()
    g.emit(f"{old} = {e}")
    g.emit(f"{r} = np.asarray({expr.format(a=a, e=old)}, u64)")
    _sdst64(g, EXEC, r)
    g.write_scc(f"{r} != 0")
    return _sdst64(g, d, r if "wrexec" in name else old)
  if name.endswith("saveexec_b32") or name.endswith("wrexec_b32"):
    a = g.raw_scalar(src, inst)
    e = g.s(EXEC)
    op = name[2:-4]
    expr = {"and_saveexec": f"{a} & {e}", "or_saveexec": f"{a} | {e}", "xor_saveexec": f"{a} ^ {e}",
            "nand_saveexec": f"~({a} & {e})", "nor_saveexec": f"~({a} | {e})", "xnor_saveexec": f"~({a} ^ {e})",
            "and_not0_saveexec": f"~np.asarray({a}, u32) & {e}", "or_not0_saveexec": f"~np.asarray({a}, u32) | {e}",
            "and_not1_saveexec": f"{a} & ~{e}", "or_not1_saveexec": f"{a} | ~{e}",
            "and_not0_wrexec": f"~np.asarray({a}, u32) & {e}", "and_not1_wrexec": f"{a} & ~{e}"}.get(op)
    if expr is None: raise Unsupported(inst, pc)
    old = g.tmp()
    r = g.tmp()
    g.emit(f"{old} = {e}")
    g.emit(f"{r} = np.asarray({expr}).astype(u32)")
    g.write_s(EXEC, r)
    g.write_scc(f"{r} != 0")
    if "wrexec" in name: return g.write_s(d, r)
    return g.write_s(d, old)
  if name == "s_getpc_b64":
    return _sdst64(g, d, g.const(pc + 4, "u64"))
  if name in ("s_setpc_b64", "s_swappc_b64"):
    target = g.tmp()
    lo, hi = g.raw_scalar(src, inst), g.raw_scalar(src + 1, inst) if src < 128 else g.const(0, "u32")
    g.emit(f"{target} = np.broadcast_to(R.p64({lo}, {hi}).astype(i64), (n,))")
    if name == "s_swappc_b64": _sdst64(g, d, g.const(pc + 4, "u64"))
    g.next_pc = f"(int({target}[0]) if ({target} == {target}[0]).all() else {target})"
    return
  if name in ("s_and_b32", "s_or_b32"):
    raise Unsupported(inst, pc)
  raise Unsupported(inst, pc)


_EXEC_OPS = {"and_saveexec": "{a} & {e}", "or_saveexec": "{a} | {e}", "xor_saveexec": "{a} ^ {e}",
             "nand_saveexec": "~({a} & {e})", "nor_saveexec": "~({a} | {e})", "xnor_saveexec": "~({a} ^ {e})",
             "and_not0_saveexec": "~{a} & {e}", "or_not0_saveexec": "~{a} | {e}", "and_not1_saveexec": "{a} & ~{e}",
             "or_not1_saveexec": "{a} | ~{e}", "and_not0_wrexec": "~{a} & {e}", "and_not1_wrexec": "{a} & ~{e}"}


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
