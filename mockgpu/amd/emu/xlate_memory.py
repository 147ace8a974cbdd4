"""Translation of vector memory instructions: DS (LDS), FLAT/GLOBAL and SCRATCH. The accesses themselves
(range checks, gathers/scatters, atomics) are in rt.MemAccess. Semantics: AMD "RDNA3 Instruction Set
Architecture", chapters "Data share operations" and "Flat, scratch and global memory"."""
from __future__ import annotations

from .decode import Inst
from .gen import Gen, Unsupported

# ---- DS (LDS) ----
DS_ATOMIC = {"add": "add", "sub": "sub", "rsub": "rsub", "mskor": "mskor", "min_i32": "smin", "max_i32": "smax", "min_u32": "umin", "max_u32": "umax",
             "and": "and", "or": "or", "xor": "xor", "inc": "inc", "dec": "dec", "add_f32": "add_f32",
             "min_f32": "min_f32", "max_f32": "max_f32", "storexchg": "swap", "cmpstore": "cmpswap"}


def _ds(g: Gen, pc: int, inst: Inst) -> None:
  name, f = inst.name, inst.fields
  if f["gds"]: raise Unsupported(inst, pc, "uses GDS")
  g.uses_wid = True
  addr = g.v(f["addr"])
  off = f["offset0"] | f["offset1"] << 8
  sizes = {"b32": 4, "b64": 8, "b96": 12, "b128": 16, "u8": 1, "i8": 1, "u16": 2, "i16": 2, "b8": 1, "b16": 2}
  if "_2addr" in name:
    stride64 = "stride64" in name
    size = 8 if name.endswith("b64") else 4
    scale = size * (64 if stride64 else 1)
    a0 = f"({addr} + u32({f['offset0'] * scale}))"
    a1 = f"({addr} + u32({f['offset1'] * scale}))"
    if name.startswith("ds_load_2addr"):
      t0, t1 = g.tmp(), g.tmp()
      g.emit(f"{t0} = M.lds_load({a0}, wid, em, ef, {size})")
      g.emit(f"{t1} = M.lds_load({a1}, wid, em, ef, {size})")
      k = 0
      for t in (t0, t1):
        for j in range(size // 4):
          g.write_v(f["vdst"] + k, f"{t}[{j}]")
          k += 1
      return
    if name.startswith("ds_store_2addr"):
      nd = size // 4
      d0 = [g.v(f["data0"] + j) for j in range(nd)]
      d1 = [g.v(f["data1"] + j) for j in range(nd)]
      g.emit(f"M.lds_store({a0}, wid, em, ef, [{', '.join(d0)}], {size})")
      g.emit(f"M.lds_store({a1}, wid, em, ef, [{', '.join(d1)}], {size})")
      return
    raise Unsupported(inst, pc)
  a = f"({addr} + u32({off}))"
  if name.startswith("ds_load_"):
    kind = name[len("ds_load_"):]
    size = sizes[kind]
    t = g.tmp()
    if size < 4:
      g.emit(f"{t} = M.lds_load({a}, wid, em, ef, {size}, {kind[0] == 'i'})")
      return g.write_v(f["vdst"], t)
    g.emit(f"{t} = M.lds_load({a}, wid, em, ef, {size})")
    for j in range(size // 4): g.write_v(f["vdst"] + j, f"{t}[{j}]")
    return
  if name.startswith("ds_store_"):
    kind = name[len("ds_store_"):]
    size = sizes.get(kind)
    if size is None: raise Unsupported(inst, pc)
    data = [g.v(f["data0"] + j) for j in range(max(1, size // 4))]
    g.emit(f"M.lds_store({a}, wid, em, ef, [{', '.join(data)}], {size})")
    return
  if name in ("ds_bpermute_b32", "ds_permute_b32", "ds_swizzle_b32"):
    # cross-lane moves through the LDS crossbar (no LDS memory is touched): RDNA3 ISA "DS_BPERMUTE_B32" etc.
    t = g.tmp()
    data = g.v(f["data0"])
    if name == "ds_swizzle_b32": g.emit(f"{t}, dppw = R.swizzle({addr}, {off}, em, ef)")   # source in ADDR
    else: g.emit(f"{t}, dppw = R.permute({data}, {a}, {name == 'ds_bpermute_b32'}, em, ef)")
    g.emit("em_s, ef_s = em, ef")
    g.emit("em = (np.ones(nl, bool) if ef else em) & dppw; ef = False")
    g.write_v(f["vdst"], t)
    g.emit("em, ef = em_s, ef_s")
    return
  base = name[3:]
  rtn = "_rtn" in base
  base = base.replace("_rtn", "")
  for suffix in ("_u32", "_b32"):
    if base.endswith(suffix) and base[:-4] in DS_ATOMIC: base = base[:-4]
  op = DS_ATOMIC.get(base)
  if op is None: raise Unsupported(inst, pc)
  data = g.v(f["data0"])
  cmp = g.v(f["data1"]) if op in ("cmpswap", "mskor") else "None"
  t = g.tmp()
  g.emit(f"{t} = M.lds_atomic({a}, wid, em, ef, '{op}', {data}, {cmp})")
  if rtn: g.write_v(f["vdst"], t)


# ---- FLAT / GLOBAL / SCRATCH ----
GLOBAL_ATOMIC = {"add_u32": "add", "sub_u32": "sub", "csub_u32": "csub",
                 "min_i32": "smin", "max_i32": "smax", "min_u32": "umin",
                 "max_u32": "umax", "and_b32": "and", "or_b32": "or", "xor_b32": "xor", "inc_u32": "inc",
                 "dec_u32": "dec", "swap_b32": "swap", "cmpswap_b32": "cmpswap", "add_f32": "add_f32",
                 "min_f32": "min_f32", "max_f32": "max_f32"}
GLOBAL_ATOMIC64 = {"add_u64": "add", "sub_u64": "sub", "min_i64": "smin", "max_i64": "smax", "min_u64": "umin",
                   "max_u64": "umax", "and_b64": "and", "or_b64": "or", "xor_b64": "xor", "swap_b64": "swap",
                   "cmpswap_b64": "cmpswap", "inc_u64": "inc", "dec_u64": "dec"}


def _vmem(g: Gen, pc: int, inst: Inst) -> None:
  name, enc, f = inst.name, inst.encoding, inst.fields
  op = name.split("_", 1)[1]   # load_b32, store_b32, atomic_add_u32 ...
  sizes = {"b32": 4, "b64": 8, "b96": 12, "b128": 16, "u8": 1, "i8": 1, "u16": 2, "i16": 2, "b8": 1, "b16": 2}
  if enc == "SCRATCH":
    g.uses_wid = True
    parts = []
    if f["saddr"] >= 0: parts.append(f"{g.s(f['saddr'])}[:, None].astype(i64)")
    if f["sve"]: parts.append(f"{g.v(f['addr'])}.astype(i64)")
    parts.append(f"i64({f['offset']})")
    offs = " + ".join(parts)
    t = g.tmp()
    if op.startswith("load_"):
      kind = op[5:]
      if kind.startswith("d16"): raise Unsupported(inst, pc)
      size = sizes[kind]
      if size < 4:
        g.emit(f"{t} = M.scratch_load({offs}, wid, em, ef, {size}, {kind[0] == 'i'})")
        return g.write_v(f["vdst"], t)
      g.emit(f"{t} = M.scratch_load({offs}, wid, em, ef, {size})")
      for j in range(size // 4): g.write_v(f["vdst"] + j, f"{t}[{j}]")
      return
    if op.startswith("store_"):
      kind = op[6:]
      if kind.startswith("d16"): raise Unsupported(inst, pc)
      size = sizes[kind]
      data = [g.v(f["data"] + j) for j in range(max(1, size // 4))]
      g.emit(f"M.scratch_store({offs}, wid, em, ef, [{', '.join(data)}], {size})")
      return
    raise Unsupported(inst, pc)
  # GLOBAL and FLAT (FLAT goes through M.f*: generic addresses routed to LDS / scratch / global by aperture)
  if enc == "GLOBAL" and f["saddr"] >= 0:     # saddr -1: none (decode._normalise)
    base = f"R.p64({g.s(f['saddr'])}, {g.s(f['saddr'] + 1)})[:, None]"
    addr = f"({base} + {g.v(f['addr'])}.astype(u64) + u64({f['offset'] & 0xFFFFFFFFFFFFFFFF}))"
  else:
    addr = g.vsrc(f["addr"] + 256, inst, "u64")   # the pair's u64 value (reused when this block computed it)
    if f["offset"]: addr = f"({addr} + u64({f['offset'] & 0xFFFFFFFFFFFFFFFF}))"
  t = g.tmp()
  flat = enc == "FLAT"
  if flat: g.uses_wid = True
  if op.startswith("load_"):
    kind = op[5:]
    if kind.startswith("d16"):
      hi = "hi" in kind
      k2 = kind.replace("d16_hi_", "").replace("d16_", "")
      size = {"b16": 2, "u8": 1, "i8": 1}[k2]
      if flat: g.emit(f"{t} = M.fload({addr}, wid, em, ef, {size}, {k2[0] == 'i'})")
      else: g.emit(f"{t} = M.gload_sub({addr}, em, ef, {size}, {k2[0] == 'i'})")
      return g.write_v(f["vdst"], f"R.put_half({g.v(f['vdst'])}, {t}, {hi})")
    size = sizes[kind]
    if flat:
      g.emit(f"{t} = M.fload({addr}, wid, em, ef, {size}, {kind[0] == 'i'})")
    elif size < 4:
      g.emit(f"{t} = M.gload_sub({addr}, em, ef, {size}, {kind[0] == 'i'})")
    else:
      g.emit(f"{t} = M.gload({addr}, em, ef, {size // 4})")
    if size < 4: return g.write_v(f["vdst"], t)
    for j in range(size // 4): g.write_v(f["vdst"] + j, f"{t}[{j}]")
    return
  store = "M.fstore(" + addr + ", wid, " if flat else "M.gstore(" + addr + ", "
  if op.startswith("store_"):
    kind = op[6:]
    if kind.startswith("d16_hi"):
      size = {"b16": 2, "b8": 1}[kind[7:]]
      g.emit(f"{store}em, ef, [{g.v(f['data'])} >> u32(16)], {size})")
      return
    size = sizes[kind]
    data = [g.v(f["data"] + j) for j in range(max(1, size // 4))]
    g.emit(f"{store}em, ef, [{', '.join(data)}], {size if size < 4 else None})")
    return
  atomic = "M.fatomic(" + addr + ", wid, " if flat else "M.gatomic(" + addr + ", "
  if op.startswith("atomic_"):
    kind = op[7:]
    if kind in GLOBAL_ATOMIC:
      aop = GLOBAL_ATOMIC[kind]
      data = g.v(f["data"])
      cmp = g.v(f["data"] + 1) if aop == "cmpswap" else "None"
      g.emit(f"{t} = {atomic}em, ef, '{aop}', {data}, {cmp}, 1)")
      if f["glc"]: g.write_v(f["vdst"], t)
      return
    if kind in GLOBAL_ATOMIC64:
      aop = GLOBAL_ATOMIC64[kind]
      data = f"R.p64({g.v(f['data'])}, {g.v(f['data'] + 1)})"
      cmp = f"R.p64({g.v(f['data'] + 2)}, {g.v(f['data'] + 3)})" if aop == "cmpswap" else "None"
      g.emit(f"{t} = {atomic}em, ef, '{aop}', {data}, {cmp}, 2)")
      if f["glc"]:
        g.write_v(f["vdst"], f"R.lo32({t})")
        g.write_v(f["vdst"] + 1, f"({t} >> u64(32)).astype(u32)")
      return
  raise Unsupported(inst, pc)
