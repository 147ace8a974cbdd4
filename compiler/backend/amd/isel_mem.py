"""Memory access selection for the RDNA3 instruction selector (a mixin of isel.ISel): GLOBAL (global_load/store,
SGPR-pair base + VGPR byte offset + 13-bit signed offset), LOCAL (ds_load/store with the 16-bit offset), REG arrays
(VGPRs when only constant indices touch them, else scratch_load/store in the private segment), gated loads."""
from __future__ import annotations

from ...ir import AddrSpace, CompileError, UOp, dtypes
from ...ir.dtypes import DType
from ...ir.uop import _short
from .isel_common import Ops, TARGET, _err, imm_of, value_of
from .isel_mir import NULL, Imm, Imm64, Spec, Sub, VReg


def pow2_divisor(u: UOp, cap: int = 1 << 16) -> int:
  """The largest power of two (up to cap) that divides every value of an integer expression (it survives 32-bit
  wraparound, unlike other divisors)."""
  c = u.const_value
  if isinstance(c, int) and not isinstance(c, bool): return min(cap, c & -c) if c else cap
  if u.op is Ops.MUL: return min(cap, pow2_divisor(u.src[0]) * pow2_divisor(u.src[1]))
  if u.op is Ops.ADD: return min(pow2_divisor(u.src[0]), pow2_divisor(u.src[1]))
  if u.op is Ops.SHL and isinstance(u.src[1].const_value, int): return min(cap, pow2_divisor(u.src[0]) << u.src[1].const_value)
  if u.op is Ops.CAST and u.src[0].dtype.is_int and u.dtype.itemsize >= u.src[0].dtype.itemsize:
    return pow2_divisor(u.src[0])
  return 1


class MemorySelector:
  def split_index(self, idx: UOp):
    """(register part, constant part) of an index: the constant terms of a tree of ADDs are summed into the
    constant part (an instruction offset), the others added (CSE'd, so a loop-invariant sum is computed once).
    Only when the register part cannot be negative: the VGPR offset of a global (saddr) access, an LDS address and
    a scratch offset are unsigned 32-bit (31 - lidx split as -lidx + 31 would address 4 GiB past the buffer)."""
    v = self.get(idx)
    self.split_align = pow2_divisor(idx)
    if isinstance(v, Imm): return None, value_of(v, idx.dtype)
    if idx.op is not Ops.ADD: return v, 0
    regs, const, stack, align, low = [], 0, [idx], 1 << 16, 0
    while stack:
      u = stack.pop()
      val = self.val.get(u)
      if isinstance(val, Imm): const += value_of(val, u.dtype)
      elif u.op is Ops.ADD and len(regs) + len(stack) < 4: stack += [u.src[1], u.src[0]]
      elif val is None: return v, 0
      else: regs.append(val); align = min(align, pow2_divisor(u)); low += u.vmin
    if const == 0 or not regs or low < 0: return v, 0
    self.split_align = align
    out = regs[0]
    for r in regs[1:]:
      if isinstance(out, VReg) and out.cls == "s" and isinstance(r, VReg) and r.cls == "s":
        out = self.sop2("s_add_i32", out, r)
      else: out = self.vop("v_add_nc_u32_e64", out, r)
    return out, const

  def byte_offset(self, x, size: int):
    """A VGPR holding x * size (x an index register)."""
    k = size.bit_length() - 1
    if k == 0: return self.to_v(x)
    return self.vop("v_lshlrev_b32_e64", Imm(k), x)

  def wide_addresses(self, buf: UOp) -> bool:
    """A GLOBAL buffer whose byte offsets may not fit the 32-bit VGPR offset of the SGPR-base form."""
    return buf.op is Ops.PARAM and buf.arg.size * buf.dtype.base.itemsize + 4096 > self.addr64_bytes

  def address64(self, buf: UOp, reg, cbytes: int):
    """A 64-bit VGPR-pair address base + index * size: one v_mad_u64_u32 (index as unsigned 32-bit, the SGPR-pair
    base as the 64-bit addend), CSE'd; the constant part stays in the 13-bit offset when it fits."""
    size = buf.dtype.base.itemsize
    if reg is None: reg, cbytes = (Imm(0), cbytes) if -4096 <= cbytes <= 4095 else (Imm(cbytes // size), cbytes % size)
    srcs = self.legal_vop3([reg, Imm(size), self.get(buf)], "int")
    key = ("v_mad_u64_u32", tuple(srcs))
    hit = None if isinstance(reg, VReg) and reg in self.mutable else self.cached(key)
    if hit is not None: return hit, cbytes
    d = VReg("v", 2)
    self.emit("v_mad_u64_u32", {"vdst": d, "sdst": Spec(NULL)}, dict(zip(("src0", "src1", "src2"), srcs)))
    if not (isinstance(reg, VReg) and reg in self.mutable): self.cse[-1][key] = d
    return d, cbytes

  def address(self, index: UOp, gated: bool):
    """(buffer UOp, VGPR byte offset, constant byte offset) for a GLOBAL or LOCAL index; for a GLOBAL buffer with
    wide_addresses() the second item is a 64-bit VGPR-pair address instead (saddr off)."""
    buf, idx = index.src[0], index.src[1]
    size = buf.dtype.base.itemsize
    self.split_align = 1
    if gated or idx.dtype.itemsize == 8:
      # (a 64-bit index: its low dword, the byte offset of an element of a buffer under 4 GiB fits 32 bits)
      reg, c = self.low32(self.get(idx)), 0
      if isinstance(reg, Imm): reg, c = None, value_of(self.get(idx), idx.dtype)
    else:
      reg, c = self.split_index(idx)
    cbytes = c * size
    if buf.dtype.addrspace is AddrSpace.GLOBAL and self.wide_addresses(buf):
      if not -4096 <= cbytes <= 4095 and reg is not None: reg, cbytes = self.low32(self.get(idx)), 0
      return (buf, *self.address64(buf, reg, cbytes))
    if buf.dtype.addrspace is AddrSpace.GLOBAL: limit_ok = -4096 <= cbytes <= 4095
    elif buf in self.scratch_off: limit_ok = -4096 <= cbytes + self.scratch_off[buf] <= 4095
    else: limit_ok = 0 <= cbytes + self.lds_off.get(buf, 0) <= 65535
    if reg is None:
      if not limit_ok: return buf, self.to_v(Imm(cbytes)), 0
      if buf in self.scratch_off: return buf, None, cbytes      # no VGPR address (SVE = 0)
      return buf, self.to_v(Imm(0)), cbytes
    if not limit_ok:
      reg, cbytes = self.low32(self.get(idx)), 0
      self.split_align = pow2_divisor(idx)
    voff = self.byte_offset(reg, size)
    if buf in self.lds_off and not gated: self.addr_align[voff] = self.split_align * size
    return buf, voff, cbytes

  def _mem_suffix(self, dt: DType, load: bool) -> str:
    if dt.itemsize == 8: return "b64"
    if dt.itemsize == 4: return "b32"
    if dt.itemsize == 2: return ("i16" if dt.kind == "int" else "u16") if load else "b16"
    if dt.itemsize == 1: return ("i8" if dt.kind == "int" else "u8") if load else "b8"
    raise CompileError(f"{TARGET}: no {dt.itemsize * 8}-bit memory access for {dt}")

  def scalar_load_ok(self, u: UOp) -> bool:
    """A LOAD that every lane makes from one address, of a buffer the kernel never writes: one s_load for the wave
    (the scalar cache is not coherent with vector stores, hence read-only params only; volatile ones keep their
    vector loads). Dword-sized (and 64-bit) elements: gfx11 has no sub-dword scalar loads."""
    index = u.src[0]
    if index.op is not Ops.INDEX or len(index.src) != 2: return False
    buf, dt = index.src[0], u.dtype
    return buf.op is Ops.PARAM and buf.arg.readonly and not buf.arg.volatile and dt.itemsize in (4, 8) and \
        not dt.is_bool and not self.wide_addresses(buf) and self.uniform(index.src[1])

  def scalar_load(self, u: UOp):
    """s_load_b32/b64 sdata, s[buffer pair], soffset offset:imm: the constant part of the index in the immediate
    (a 20-bit byte offset), the uniform register part scaled in an SGPR."""
    index = u.src[0]
    buf, idx = index.src
    size = u.dtype.itemsize
    reg, c = (self.low32(self.get(idx)), 0) if idx.dtype.itemsize == 8 else self.split_index(idx)
    if isinstance(reg, Imm): reg, c = None, value_of(reg, idx.dtype)
    if not 0 <= c * size < 1 << 20:
      reg, c = self.low32(self.get(idx)), 0
      if isinstance(reg, Imm): reg, c = self.to_s(reg), 0
    uses = {"sbase": self.get(buf)}
    if reg is not None:
      if not (isinstance(reg, VReg) and reg.cls == "s"):   # a uniform value some path left in a VGPR
        reg = self.pure("v_readfirstlane_b32", [reg], "s", "vdst")
      uses["soffset"] = self.sop2("s_lshl_b32", reg, Imm(size.bit_length() - 1))
    d = VReg("s", size // 4)
    self.emit(f"s_load_b{8 * size}", {"sdata": d}, uses, offset=c * size)
    return d

  def load(self, u: UOp):
    index = u.src[0]
    buf = index.src[0]
    dt = u.dtype
    if self.scalar_load_ok(u): return self.scalar_load(u)
    if buf.dtype.addrspace is AddrSpace.REG and buf not in self.scratch_off: return self.reg_load(u, index)
    if dt.itemsize == 8 and buf in self.scratch_off: raise _err(u, "64-bit private arrays in scratch are not supported")
    gate = self.get(index.src[2]) if len(index.src) == 3 else None
    if isinstance(gate, Imm):
      if not gate.bits: return imm_of(0, dt)
      gate = None
    if gate is not None:
      # select a safe index (0) where the gate is off, load, then 0 there
      raw = self.low32(self.get(index.src[1]))
      safe = self.cndmask(gate, Imm(0), raw)
      _, voff, cbytes = self._address_of(buf, safe, index.src[1].dtype)
    else:
      _, voff, cbytes = self.address(index, False)
    mem_dt = dtypes.uint8 if dt.is_bool else dt
    d = VReg("v", 2 if dt.itemsize == 8 else 1)
    suffix = self._mem_suffix(mem_dt, True)
    if buf.dtype.addrspace is AddrSpace.LOCAL:
      self.emit(f"ds_load_{suffix}", {"vdst": d}, {"addr": voff}, offset=cbytes + self.lds_off[buf])
    elif buf in self.scratch_off:
      self.emit(f"scratch_load_{suffix}", {"vdst": d}, {"addr": voff} if voff is not None else {},
                offset=cbytes + self.scratch_off[buf])
    else:
      base = {} if voff.n == 2 else {"saddr": self.get(buf)}
      self.emit(f"global_load_{suffix}", {"vdst": d}, {"addr": voff} | base, offset=cbytes, **_volatile(buf))
    out = d
    if dt.is_bool: out = self.vcmp("v_cmp_ne_u32_e64", d, Imm(0))
    if gate is not None:
      if dt.itemsize == 8: return self.where64(gate, Imm64(0), out)
      out = self.sop2("s_and_b32", out, gate) if dt.is_bool else self.cndmask(gate, Imm(0), out)
    return out

  def _address_of(self, buf, reg, idx_dt):
    if buf.dtype.addrspace is AddrSpace.GLOBAL and self.wide_addresses(buf): return (buf, *self.address64(buf, reg, 0))
    size = buf.dtype.base.itemsize
    return buf, self.byte_offset(reg, size), 0

  def reg_elem(self, index: UOp) -> VReg:
    regs = self.reg_bufs.get(index.src[0])
    if regs is None: raise CompileError(f"{TARGET}: REG buffer used before its BUFFER: {_short(index)}", index)
    i = self.get(index.src[1])
    if not isinstance(i, Imm): raise _err(index, "a private register array indexed by a non-constant")
    k = value_of(i, index.src[1].dtype)
    if not 0 <= k < len(regs): raise _err(index, f"index {k} outside the private array of {len(regs)}")
    return regs[k]

  def reg_load(self, u: UOp, index: UOp):
    if len(index.src) == 3: raise _err(u, "gated load from a private array")
    r = self.reg_elem(index)
    if r.n == 2: return self.join(Sub(r, 0), Sub(r, 1))
    d = VReg("v")
    self.emit("v_mov_b32_e32", {"vdst": d}, {"src0": r}, copy=True)
    return d

  def store(self, u: UOp):
    index, value = u.src
    buf = index.src[0]
    v = self.get(value)
    dt = value.dtype
    if buf.dtype.addrspace is AddrSpace.REG and buf not in self.scratch_off:
      r = self.reg_elem(index)
      if r.n == 2:
        for k, half in enumerate(self.halves(v)): self.emit("v_mov_b32_e32", {"vdst": Sub(r, k)}, {"src0": half})
        return
      if isinstance(v, VReg) and v.cls == "s" and dt.is_bool: v = self.cndmask(v, Imm(0), Imm(-1))
      self.emit("v_mov_b32_e32", {"vdst": r}, {"src0": v}, copy=True)
      return
    if dt.itemsize == 8 and buf in self.scratch_off: raise _err(u, "64-bit private arrays in scratch are not supported")
    if dt.is_bool: v, dt = self.cndmask(v, Imm(0), Imm(1)), dtypes.uint8
    data = self.to_v64(v) if dt.itemsize == 8 else self.to_v(v)
    _, voff, cbytes = self.address(index, False)
    suffix = self._mem_suffix(dt, False)
    if buf.dtype.addrspace is AddrSpace.LOCAL:
      self.emit(f"ds_store_{suffix}", {}, {"addr": voff, "data0": data}, offset=cbytes + self.lds_off[buf])
    elif buf in self.scratch_off:
      self.emit(f"scratch_store_{suffix}", {}, ({"addr": voff} if voff is not None else {}) | {"data": data},
                offset=cbytes + self.scratch_off[buf])
    else:
      base = {} if voff.n == 2 else {"saddr": self.get(buf)}
      self.emit(f"global_store_{suffix}", {}, {"addr": voff, "data": data} | base, offset=cbytes, **_volatile(buf))


def _volatile(buf: UOp) -> dict:
  """volatile=True for a volatile PARAM's accesses (the encoder gives them the system scope where the target has
  scope bits: gfx1200)."""
  return {"volatile": True} if buf.op is Ops.PARAM and getattr(buf.arg, "volatile", False) else {}
