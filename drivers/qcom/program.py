"""ir3 compute programs in Mesa computerator's format, and how one launches on an Adreno 6xx.

A program is text: headers, then ir3 assembly (assembled by hcq.compiler.backend.ir3.asm):
  @localsize X, Y, Z      the work-group size the program is written for (launches must use it)
  @buf N [(cR.c)]         a buffer of N dwords; the i-th @buf is IBO i (ldib/stib slot i, g[i]); with (cR.c) its
                          64-bit address is also put in the constants cR.c, cR.c+1
  @const(cR.c) a, b, c, d a vec4 of constants from cR.c (floats, or integers written 0x... / -N)
  @invocationid(rN.c)     the local invocation id (x, y, z) in rN.c..; @wgid(rN.c): the work-group id (a high
                          register, r48.x and up); @numwg(cR.c): the number of work-groups, in constants
  @branchstack N, @pvtmem N, @earlypreamble   accepted (the mock does not model them)
`prog(*buffers, global_size=groups, local_size=...)` binds the buffers in @buf order.

A launch (dispatch_words): SP/HLSQ compute registers by type-4 packets (thread size, register footprint, the
registers the hardware fills with the invocation and work-group ids, the work-group size and count), the shader and
the constants and IBO descriptors by CP_LOAD_STATE6_FRAG (indirect, from GPU memory), then CP_EXEC_CS. Register and
field names are the a6xx rnndb module's (hcq.autogen.qcom.a6xx)."""
from __future__ import annotations

import dataclasses
import re
import struct

from ...errors import DeviceError
from ..hcq import Program
from ..hcq.cmdbuf import Sym
from . import cp

V_CONSTS, V_IBOS = ("var", "consts"), ("var", "ibos")
REGID_NONE = 0xFC                    # regid(63, 0): "no register"
BRANCHSTACK_MAX = 63                 # SP_CS_CTRL_REG0.BRANCHSTACK is 6 bits (a6xx.xml; held to the module by a test)
IBO_DWORDS = 16                      # an IBO descriptor (A6XX_TEX_CONST_0..15)
INSTR_GROUP = 128                    # bytes: the shader is loaded in groups of 16 instructions
WAVE = 64                            # THREAD64


def _a6xx():
  from ...autogen.qcom import a6xx
  return a6xx


def _pm4():
  from ...autogen.qcom import adreno_pm4
  return adreno_pm4


@dataclasses.dataclass
class Kernel:
  """What a computerator program's headers say."""
  local_size: tuple[int, int, int] = (1, 1, 1)
  bufs: list = dataclasses.field(default_factory=list)            # [(dwords, const regid or None)]
  consts: dict = dataclasses.field(default_factory=dict)          # const component index -> u32
  invocation_id: int = REGID_NONE
  wgid: int = REGID_NONE
  numwg: int | None = None                                        # const component index
  branchstack: int = 0
  pvtmem: int = 0
  early_preamble: bool = False


_REG = re.compile(r"^\s*([rc])(\d+)\.([xyzw])\s*$")


def _regid(text: str, kind: str, where: str) -> int:
  m = _REG.match(text)
  if not m or m.group(1) != kind:
    raise DeviceError(f"{where}: {text.strip()!r} is not a {'register rN.c' if kind == 'r' else 'constant cN.c'}")
  regid = int(m.group(2)) * 4 + "xyzw".index(m.group(3))
  # a register id goes into 8-bit fields (HLSQ_CS_CNTL_0 LOCALIDREGID/WGIDCONSTID) where regid(63, 0) = 0xFC means
  # "none": r0.x .. r62.w are the registers a program can name there
  if kind == "r" and regid >= REGID_NONE:
    raise DeviceError(f"{where}: {text.strip()!r} is past r62.w (the register id fields hold r0.x .. r62.w)")
  return regid


def _const_value(text: str, where: str) -> int:
  t = text.strip()
  try:
    if re.fullmatch(r"-?(0x[0-9a-fA-F]+|\d+)", t): return int(t, 0) & 0xFFFFFFFF
    return struct.unpack("<I", struct.pack("<f", float(t)))[0]
  except (ValueError, OverflowError): raise DeviceError(f"{where}: {t!r} is not a number") from None


def parse(text: str, name: str = "program") -> tuple[Kernel, str]:
  """(the headers, the assembly with the header lines blanked so that line numbers stay) of a computerator program."""
  k, body = Kernel(), []
  for n, line in enumerate(text.splitlines(), 1):
    code = line.split(";", 1)[0].strip()
    if not code.startswith("@"):
      body.append(line)
      continue
    body.append("")
    where = f"{name}:{n}"
    m = re.match(r"@(\w+)\s*(?:\(([^)]*)\))?\s*(.*)$", code)
    if not m: raise DeviceError(f"{where}: cannot read the header {code!r}")
    head, arg, rest = m.group(1), m.group(2), m.group(3).strip()
    if head == "localsize":
      try: dims = tuple(int(x) for x in rest.split(","))
      except ValueError: dims = ()
      if len(dims) != 3 or any(d <= 0 for d in dims): raise DeviceError(f"{where}: @localsize needs X, Y, Z, got {rest!r}")
      k.local_size = dims
    elif head == "buf":
      size_text = code[len("@buf"):].split("(", 1)[0].strip()
      if not size_text.isdigit() or int(size_text) <= 0:
        raise DeviceError(f"{where}: @buf needs a size in dwords, got {size_text!r}")
      creg = re.search(r"\(([^)]*)\)", code)
      k.bufs.append((int(size_text), _regid(creg.group(1), "c", where) if creg else None))
    elif head == "const":
      base = _regid(arg or "", "c", where)
      vals = [v for v in rest.split(",") if v.strip()]
      if not vals: raise DeviceError(f"{where}: @const needs values")
      for i, v in enumerate(vals): k.consts[base + i] = _const_value(v, where)
    elif head == "invocationid": k.invocation_id = _regid(arg or "", "r", where)
    elif head == "wgid":
      k.wgid = _regid(arg or "", "r", where)
      if k.wgid < 48 * 4: raise DeviceError(f"{where}: @wgid must name a high register (r48.x and up), got {arg}")
    elif head == "numwg": k.numwg = _regid(arg or "", "c", where)
    elif head in ("branchstack", "pvtmem"):
      if not rest.isdigit(): raise DeviceError(f"{where}: @{head} needs a number, got {rest!r}")
      if head == "branchstack" and int(rest) > BRANCHSTACK_MAX:   # SP_CS_CTRL_REG0.BRANCHSTACK, bits 19:14
        raise DeviceError(f"{where}: @branchstack {rest} does not fit SP_CS_CTRL_REG0.BRANCHSTACK (at most {BRANCHSTACK_MAX})")
      setattr(k, head, int(rest))
    elif head == "earlypreamble": k.early_preamble = True
    else: raise DeviceError(f"{where}: unknown header @{head}")
  return k, "\n".join(body) + "\n"


def footprint(isa, words) -> tuple[int, int]:
  """(full registers, vec4 constants) the instructions name: the highest index + 1 of each. Every register is
  counted as a full one (a half register hrN lives in r(N/2) with merged registers, so this never counts short);
  r48 and up (the work-group id registers, a0, p0) are not part of the footprint."""
  top = {"gpr": -1, "const": -1}

  def walk(d):
    for v in d.fields.values():
      if not hasattr(v, "fields"): continue
      if v.name == "#reg-gpr" and v.fields.get("GPR", 0) < 48: top["gpr"] = max(top["gpr"], v.fields["GPR"])
      elif v.name == "#reg-const": top["const"] = max(top["const"], v.fields.get("CONST", 0))
      walk(v)
  for w in words:
    try: walk(isa.decode(w))
    except Exception: continue                   # a word of no instruction names no register
  return top["gpr"] + 1, top["const"] + 1


class IR3Layout:
  """The ArgLayout of a computerator program: one Buffer per @buf, in order, each at least the header's size."""
  dynamic_shared = False

  def __init__(self, kernel: Kernel, name: str):
    self.kernel, self.name = kernel, name
    self.segment_size = 8 * len(kernel.bufs)

  def shared_layout(self, args): return [], 0
  def hidden_values(self, grid, block, extra): return b""

  def check_and_pack(self, args, buffer_type, device) -> bytes:
    bufs = self.kernel.bufs
    if len(args) != len(bufs):
      raise DeviceError(f"kernel {self.name}: takes {len(bufs)} buffer(s) (its @buf headers), got {len(args)} argument(s)")
    out = []
    for i, (a, (dwords, _)) in enumerate(zip(args, bufs)):
      if not isinstance(a, buffer_type):
        raise DeviceError(f"kernel {self.name}: argument {i} must be a Buffer (@buf {dwords}), got {type(a).__name__}")
      if a.device is not device: raise DeviceError(f"kernel {self.name}: argument {i}, {a}, belongs to another device")
      if a.freed: raise DeviceError(f"kernel {self.name}: argument {i}, {a}, was freed")
      if a.size < dwords * 4:
        raise DeviceError(f"kernel {self.name}: argument {i} is {a.size} bytes, its @buf needs {dwords * 4}")
      out.append(a.va)
    return struct.pack(f"<{len(out)}Q", *out)


class QCOMProgram(Program):
  def __init__(self, device, name: str, kernel: Kernel, code_va: int, code_size: int, words: list[int]):
    super().__init__(device, name, IR3Layout(kernel, name), 1024)
    self.kernel, self.code_va, self.code_size = kernel, code_va, code_size
    self.required_block = kernel.local_size
    full, consts = footprint(device.isa, words)
    self.full_regs = max(full, 1)
    top_const = max([consts * 4 - 1, *kernel.consts, kernel.numwg + 2 if kernel.numwg is not None else -1,
                     *(c + 1 for _, c in kernel.bufs if c is not None)])
    self.constlen = max(4, (top_const // 4 + 4) & ~3)   # vec4s, a multiple of 4 (HLSQ_CS_CNTL_CONSTLEN drops 2 bits)
    if self.constlen > 1020 or self.full_regs > 48:
      raise DeviceError(f"{name}: needs {self.constlen} vec4 constants and {self.full_regs} registers (at most 1020, 48)")

  def make_shape(self, grid, block, timed, shared=None):
    return self.device.launch_cmdbuf(self, grid, block, timed)

  def launch_data(self, explicit: bytes, grid) -> bytes:
    """Constants (constlen vec4s) then one IBO descriptor per buffer."""
    k = self.kernel
    consts = [0] * (self.constlen * 4)
    for i, v in k.consts.items(): consts[i] = v
    addrs = struct.unpack(f"<{len(k.bufs)}Q", explicit) if k.bufs else ()
    for (dwords, creg), va in zip(k.bufs, addrs):
      if creg is not None: consts[creg], consts[creg + 1] = va & 0xFFFFFFFF, va >> 32
    if k.numwg is not None: consts[k.numwg:k.numwg + 3] = list(grid)
    ibos = []
    for (dwords, _), va in zip(k.bufs, addrs): ibos += ibo_descriptor(va, dwords)
    return struct.pack(f"<{len(consts) + len(ibos)}I", *consts, *ibos)

  def dispatch_words(self, grid, block) -> list:
    a, p, k = _a6xx(), _pm4(), self.kernel
    consts, ibos = Sym(V_CONSTS), Sym(V_IBOS)
    cntl0 = a.A6XX_HLSQ_CS_CNTL_0_WGIDCONSTID(k.wgid) | a.A6XX_HLSQ_CS_CNTL_0_WGSIZECONSTID(REGID_NONE) | \
      a.A6XX_HLSQ_CS_CNTL_0_WGOFFSETCONSTID(REGID_NONE) | a.A6XX_HLSQ_CS_CNTL_0_LOCALIDREGID(k.invocation_id)
    ndrange = a.A6XX_HLSQ_CS_NDRANGE_0_KERNELDIM(3) | a.A6XX_HLSQ_CS_NDRANGE_0_LOCALSIZEX(block[0] - 1) | \
      a.A6XX_HLSQ_CS_NDRANGE_0_LOCALSIZEY(block[1] - 1) | a.A6XX_HLSQ_CS_NDRANGE_0_LOCALSIZEZ(block[2] - 1)
    # merged registers (half registers are halves of the full ones: a6xx's mode, and what the mock models)
    ctrl = a.A6XX_SP_CS_CTRL_REG0_THREADSIZE(0) | a.A6XX_SP_CS_CTRL_REG0_FULLREGFOOTPRINT(self.full_regs) | \
      a.A6XX_SP_CS_CTRL_REG0_BRANCHSTACK(k.branchstack) | a.A6XX_SP_CS_CTRL_REG0_MERGEDREGS
    nibo = len(k.bufs)
    units = (self.code_size + INSTR_GROUP - 1) // INSTR_GROUP
    words = cp.set_marker(p.RM6_COMPUTE)
    words += cp.pkt4(a.REG_A6XX_SP_CS_CTRL_REG0, ctrl)
    words += cp.pkt4(a.REG_A6XX_HLSQ_CS_CNTL, a.A6XX_HLSQ_CS_CNTL_CONSTLEN(self.constlen) | a.A6XX_HLSQ_CS_CNTL_ENABLED)
    words += cp.pkt4(a.REG_A6XX_SP_CS_CNTL_0, cntl0) + cp.pkt4(a.REG_A6XX_HLSQ_CS_CNTL_0, cntl0)
    words += cp.pkt4(a.REG_A6XX_HLSQ_CS_NDRANGE_0, ndrange, grid[0] * block[0], 0, grid[1] * block[1], 0,
                     grid[2] * block[2], 0)
    words += cp.pkt4(a.REG_A6XX_HLSQ_CS_KERNEL_GROUP_X, 1, 1, 1)
    words += cp.pkt4(a.REG_A6XX_SP_CS_OBJ_START, self.code_va & 0xFFFFFFFF, self.code_va >> 32)
    words += cp.pkt4(a.REG_A6XX_SP_CS_INSTRLEN, units)
    words += cp.pkt4(a.REG_A6XX_SP_CS_CONFIG, a.A6XX_SP_CS_CONFIG_ENABLED | a.A6XX_SP_CS_CONFIG_NIBO(nibo))
    words += cp.load_state6(p.ST6_SHADER, p.SB6_CS_SHADER, units, self.code_va)
    words += cp.load_state6(p.ST6_CONSTANTS, p.SB6_CS_SHADER, self.constlen, consts)
    if nibo:
      words += cp.load_state6(p.ST6_IBO, p.SB6_CS_SHADER, nibo, ibos)
      words += cp.pkt4(a.REG_A6XX_SP_CS_IBO, cp.lo(ibos), cp.hi(ibos)) + cp.pkt4(a.REG_A6XX_SP_CS_IBO_COUNT, nibo)
    words += cp.exec_cs(*grid)
    return words


def ibo_descriptor(va: int, dwords: int) -> list[int]:
  """A buffer IBO of 32-bit elements (A6XX_TEX_CONST layout: format, width/height = the element count split at 15
  bits, type BUFFER, the base address in dwords 4 and 5)."""
  a = _a6xx()
  d = [0] * IBO_DWORDS
  d[0] = a.A6XX_TEX_CONST_0_FMT(a.ENUMS["a6xx_format"]["FMT6_32_UINT"])
  d[1] = a.A6XX_TEX_CONST_1_WIDTH(dwords & 0x7FFF) | a.A6XX_TEX_CONST_1_HEIGHT(dwords >> 15)
  # STRUCTSIZETEXELS 1 for a buffer, as Mesa 25's fdl6_buffer_view_init (src/freedreno/fdl/fd6_view.c) writes it (the
  # "BUFFER" flag of Mesa 22's a6xx.xml, the same bit 4)
  d[2] = a.A6XX_TEX_CONST_2_TYPE(a.ENUMS["a6xx_tex_type"]["A6XX_TEX_BUFFER"]) | a.A6XX_TEX_CONST_2_STRUCTSIZETEXELS(1)
  d[4] = a.A6XX_TEX_CONST_4_BASE_LO(va & 0xFFFFFFE0)   # BASE_LO drops 5 bits: KGSL objects are page-aligned
  d[5] = a.A6XX_TEX_CONST_5_BASE_HI(va >> 32)
  return d
