"""Operands: reading a source (registers, constants within CONSTLEN, immediates, the float lookup table, relative
forms through a0.x), the (abs)/(neg) modifiers, and the decoded-instruction records."""
from __future__ import annotations

import numpy as np

from ....errors import GPUFault
from .values import A0, FLUT, M32, OutOfState, Unsupported, b16, b32, f16, f32, sext
from ..sync import Sync


# ---- operands
def _gpr(d):
  return d.fields["GPR"] * 4 + d.fields["SWIZ"]


def src_reader(op, half, ctx, *, float_op=False):
  """A function (fibers, repeat step) -> raw bits of a cat2/cat3/cat4 source operand."""
  name, f = op.name, op.fields
  if name in ("#multisrc-gpr", "#cat3-src-gpr", "#cat1-gpr-src"):
    r = _gpr(f["SRC"])
    return lambda F, i: F.read(r + i, half)
  if name == "#reg-gpr":
    r = _gpr(op)
    return lambda F, i: F.read(r + i, half)
  if name in ("#multisrc-const", "#cat3-src-const-or-immed", "#cat1-const-src") and ("SRC" in f or "CONST" in f):
    c = f.get("SRC", f.get("CONST"))
    if hasattr(c, "fields"): c = c.fields["CONST"] * 4 + c.fields["SWIZ"]
    else: c = f["CONST"] * 4 + f["SWIZ"]
    if "IMMED" in f and name == "#cat3-src-const-or-immed" and ctx.get("immed"):
      v = f["IMMED"] & (0xFFFF if half else M32)
      return lambda F, i: np.uint32(v)
    consts, limit = ctx["consts"], ctx.get("constlen", 1 << 30) * 4
    demote = half and ctx.get("demotion", False)
    top = ((c >> 1) if half and not demote else c) + ctx.get("rpt", 0)
    if top >= limit:        # HLSQ_CS_CNTL.CONSTLEN: the constants the dispatch loaded (in vec4s)
      raise OutOfState(f"reads c{top // 4}.{'xyzw'[top % 4]}, past HLSQ_CS_CNTL.CONSTLEN ({limit // 4} vec4s)")
    if demote:
      # SP_MODE_CONTROL.CONSTANT_DEMOTION_ENABLE (a6xx.xml): hcN.c loads cN.c's 32-bit value and converts it to 16
      # bits by the operand's type (f2f16 for a float operation, u2u16 for an integer one)
      if float_op: return lambda F, i: b16(f32(consts[c + i]).astype(np.float16))
      return lambda F, i: np.uint32(int(consts[c + i]) & 0xFFFF)
    if half:            # demotion off: 16 bits of the packed constant file (hc0.y = the top half of c0.x)
      return lambda F, i: np.uint32((int(consts[(c + i) >> 1]) >> (16 * ((c + i) & 1))) & 0xFFFF)
    return lambda F, i: consts[c + i]
  if name in ("#mulitsrc-immed", "#cat1-immed-src"):
    v = f["IMMED"] & (0xFFFF if half else M32)
    return lambda F, i: np.uint32(v)
  if name == "#multisrc-immed-flut-full":
    v = int(b32(np.float32(FLUT[f["IMMED"]])))
    return lambda F, i: np.uint32(v)
  if name == "#multisrc-immed-flut-half":
    v = int(b16(np.float16(FLUT[f["IMMED"]])))
    return lambda F, i: np.uint32(v)
  if name in ("#multisrc-relative-gpr", "#cat1-relative-gpr-src"):
    off = (f["SRC"].fields["OFFSET"] if "SRC" in f else f["OFFSET"])
    def rel(F, i):
      rid = sext(F.R[A0], 16) + off + i
      if half: return np.array([(F.R[r >> 1, k] >> (16 * (r & 1))) & 0xFFFF for k, r in enumerate(rid.tolist())], np.uint32)
      return F.R[np.clip(rid, 0, 255), np.arange(F.n)]
    return rel
  if name in ("#multisrc-relative-const", "#cat1-relative-const-src"):
    off = (f["SRC"].fields["OFFSET"] if "SRC" in f else f["OFFSET"])
    consts, limit = ctx["consts"], ctx.get("constlen", 1 << 30) * 4
    def relc(F, i):
      ix = sext(F.R[A0], 16) + off + i
      live = F.alive if F.sel is None else F.sel
      bad = ((ix < 0) | (ix >= min(limit, len(consts)))) & live
      if bad.any():
        raise GPUFault(f"ir3: c[a0.x{off:+d}] reads constant {int(ix[bad][0])}, outside HLSQ_CS_CNTL.CONSTLEN "
                       f"({limit // 4} vec4s)", kind="illegal instruction")
      return consts[np.clip(ix, 0, len(consts) - 1)]
    return relc
  raise Unsupported(f"operand {name}")


def absneg(bits, mod, kind, half):
  """Apply (abs)/(neg): kind "f" (float), "s" (integer), "b" (bitwise: (neg) is not)."""
  if not mod: return bits
  mask = 0xFFFF if half else M32
  if kind == "f":
    x = f16(bits) if half else f32(bits)
    if mod & 2: x = np.abs(x)
    if mod & 1: x = -x
    return b16(x) if half else b32(x)
  if kind == "b":
    return (~np.asarray(bits, np.uint32)) & mask if mod & 1 else bits
  v = sext(bits, 16 if half else 32)
  if mod & 2: v = np.abs(v)
  if mod & 1: v = -v
  return (v & mask).astype(np.uint32)


class Ins:
  """A decoded instruction with what building it needs: the constant file and its pc."""
  __slots__ = ("name", "fields", "ctx", "pc")

  def __init__(self, name, fields, ctx, pc): self.name, self.fields, self.ctx, self.pc = name, fields, ctx, pc


class Instr:
  __slots__ = ("pc", "name", "text", "run", "rpt", "kind", "sync")

  def __init__(self, pc, name, text, run, rpt=0, kind="alu", sync=None):
    self.pc, self.name, self.text, self.run, self.rpt, self.kind = pc, name, text, run, rpt, kind
    self.sync = sync if sync is not None else Sync()


def _bad(pc, text, why):
  def run(F, D, i=0):
    raise GPUFault(f"ir3: instruction {pc} ({text}) is not modelled: {why}", kind="illegal instruction")
  return run


def _dst(d):
  dst = d.fields["DST"]
  while dst.name != "#reg-gpr": dst = dst.fields["DST"]
  return _gpr(dst)


def _special(regid): return regid >= A0
