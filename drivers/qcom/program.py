"""ir3 compute programs in Mesa computerator's format, and how one launches on an Adreno 6xx.

A program is text: headers, then ir3 assembly (assembled by hcq.compiler.isa.ir3.asm):
  @localsize X, Y, Z      the work-group size the program is written for (launches must use it)
  @buf N [(cR.c)]         a buffer of N dwords; the i-th @buf is IBO i (ldib/stib slot i, g[i]); with (cR.c) its
                          64-bit address is also put in the constants cR.c, cR.c+1
  @const(cR.c) a, b, c, d a vec4 of constants from cR.c (floats, or integers written 0x... / -N)
  @invocationid(rN.c)     the local invocation id (x, y, z) in rN.c..; @wgid(rN.c): the work-group id (a high
                          register, r48.x and up); @numwg(cR.c): the number of work-groups, in constants
  @branchstack N          SP_CS_CTRL_REG0.BRANCHSTACK
  @pvtmem N               N bytes of private memory per fiber (ldp/stp): SP_CS_PVT_MEM_* and HW_STACK_OFFSET
  @earlypreamble          SP_CS_CTRL_REG0.EARLYPREAMBLE
  @localmem N             (hcq's) N bytes of shared memory (ldl/stl); without it, computerator's SHARED_SIZE(1): 2 KiB
`prog(*buffers, global_size=groups, local_size=...)` binds the buffers in @buf order.

A launch (dispatch_words) programs the compute state Mesa's computerator programs (src/freedreno/computerator/a6xx.c,
cs_program_emit / cs_ibo_emit / a6xx_emit_grid), register by register; the table in drivers/qcom/README.md sets
each next to computerator's line and tinygrad's. Register and field names are the a6xx rnndb module's
(hcq.autogen.qcom.a6xx). Device facts of the a630 (Adreno 6xx gen1) are Mesa's src/freedreno/common/
freedreno_devices.py: reg_size_vec4 96, instr_cache_size 64, fibers_per_sp 128 * 16, 2 SP cores, no LPAC."""
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
MAX_CONSTLEN = 256                   # vec4s a6xx compute may use (Mesa ir3_compiler.c: max_const_compute = 256, gen 6)
INSTR_CACHE = 64                     # 128-byte groups computerator preloads at most (instr_cache_size, a6xx gen1)
FIBERS_PER_SP, SP_CORES = 128 * 16, 2
REG_FILE = 96 * 4                    # full registers per fiber slot (reg_size_vec4 96): tinygrad's 384 in max_threads
LOCAL_MAX = 32 << 10                 # shared memory per work-group (SP_CS_CTRL_REG1, SP_CS_UNKNOWN_A9B1 before Mesa 25: "all 32k")


def max_threads(full_regs: int) -> int:
  """The largest work-group the register footprint allows: tinygrad 0.14's QCOMProgram.max_threads, which runs on a
  real a630 (min(1024, (384 * 32) // (footprint * 128) * 128)), with the footprint in full registers (merged)."""
  return min(1024, (REG_FILE * 32) // (max(1, full_regs) * 128) * 128)


def shared_size_field(localmem: int) -> int:
  """SP_CS_CTRL_REG1.SHARED_SIZE for `localmem` bytes: (SHARED_SIZE + 1) KiB are enabled (a6xx.xml), at least 1
  as Mesa's freedreno and computerator write it (MAX2((local_mem - 1) / 1024, 1))."""
  return max((localmem - 1) // 1024, 1)


def pvtmem_sizes(pvtmem: int) -> tuple[int, int]:
  """(bytes per fiber, bytes per SP) of private memory, as computerator's cs_program_emit computes them."""
  per_fiber = (pvtmem + 511) & ~511
  return per_fiber, (per_fiber * FIBERS_PER_SP + 0xFFF) & ~0xFFF


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
  localmem: int = 0


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
      if int(size_text) >= 1 << 30:              # A6XX_TEX_CONST_1 WIDTH/HEIGHT: 15 + 15 bits of elements
        raise DeviceError(f"{where}: @buf {size_text} does not fit an IBO descriptor (fewer than 2^30 dwords)")
      if len(k.bufs) >= 127:                     # SP_CS_CONFIG.NIBO: 7 bits
        raise DeviceError(f"{where}: more than 127 @buf (SP_CS_CONFIG.NIBO holds at most 127 IBOs)")
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
    elif head in ("branchstack", "pvtmem", "localmem"):
      if not rest.isdigit(): raise DeviceError(f"{where}: @{head} needs a number, got {rest!r}")
      if head == "branchstack" and int(rest) > BRANCHSTACK_MAX:   # SP_CS_CTRL_REG0.BRANCHSTACK, bits 19:14
        raise DeviceError(f"{where}: @branchstack {rest} does not fit SP_CS_CTRL_REG0.BRANCHSTACK (at most {BRANCHSTACK_MAX})")
      if head == "localmem" and not 0 < int(rest) <= LOCAL_MAX:
        raise DeviceError(f"{where}: @localmem {rest} is not 1..{LOCAL_MAX} bytes (a work-group's shared memory)")
      if head == "pvtmem" and int(rest) > 255 * 512:        # SP_CS_PVT_MEM_PARAM.MEMSIZEPERITEM: 8 bits of 512 B
        raise DeviceError(f"{where}: @pvtmem {rest} does not fit SP_CS_PVT_MEM_PARAM.MEMSIZEPERITEM (at most {255 * 512})")
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
  for w in set(words):                           # each distinct word once: long programs repeat theirs
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
  def __init__(self, device, name: str, kernel: Kernel, code_va: int, code_size: int, words: list[int], pvt=None):
    full, consts = footprint(device.isa, words)
    if kernel.invocation_id < 48 * 4:          # the hardware writes the ids there: Mesa counts sysval inputs in max_reg
      full = max(full, (kernel.invocation_id + 2) // 4 + 1)
    full_regs = max(full, 1)
    super().__init__(device, name, IR3Layout(kernel, name), max_threads(full_regs))
    self.kernel, self.code_va, self.code_size, self.pvt = kernel, code_va, code_size, pvt
    self.required_block = kernel.local_size
    self.full_regs = full_regs
    top_const = max([consts * 4 - 1, *kernel.consts, kernel.numwg + 2 if kernel.numwg is not None else -1,
                     *(c + 1 for _, c in kernel.bufs if c is not None)])
    self.constlen = max(4, (top_const // 4 + 4) & ~3)   # vec4s, a multiple of 4 (HLSQ_CS_CNTL_CONSTLEN drops 2 bits)
    if self.constlen > MAX_CONSTLEN or self.full_regs > 48:
      raise DeviceError(f"{name}: needs {self.constlen} vec4 constants and {self.full_regs} registers (at most "
                        f"{MAX_CONSTLEN}, 48)")
    threads = kernel.local_size[0] * kernel.local_size[1] * kernel.local_size[2]
    if threads > self.max_group:
      raise DeviceError(f"{name}: @localsize {kernel.local_size} is {threads} threads; a footprint of {self.full_regs} "
                        f"full registers allows at most {self.max_group} per work-group (SP_CS_CTRL_REG0."
                        f"FULLREGFOOTPRINT; tinygrad's max_threads)")
    self.units = (code_size + INSTR_GROUP - 1) // INSTR_GROUP
    if self.units >= 1 << 28:                  # SP_CS_INSTRLEN: bits 27:0 (a6xx.xml)
      raise DeviceError(f"{name}: {code_size // 8} instructions do not fit SP_CS_INSTRLEN (28 bits of 16-instruction groups)")

  def shape_data(self, s) -> None:
    """The launch data of this shape with every buffer address 0 (data): a launch copies it and patches the
    addresses in (patch_addresses)."""
    s.data = self.launch_data(bytes(8 * len(self.kernel.bufs)), s.grid)
    s.data_size = len(s.data)

  def patch_addresses(self, view: memoryview, explicit: bytes) -> None:
    """Write the buffers' addresses (explicit: u64 each) into launch data built by launch_data with zero addresses:
    their constant registers and their IBO descriptors' base dwords (ibo_descriptor: dwords 4 and 5 hold only the
    base)."""
    base = self.constlen * 16
    for i, ((dwords, creg), va) in enumerate(zip(self.kernel.bufs, struct.unpack_from(f"<{len(self.kernel.bufs)}Q", explicit))):
      if creg is not None: struct.pack_into("<II", view, creg * 4, va & 0xFFFFFFFF, va >> 32)
      lo, hi = ibo_base(va)
      struct.pack_into("<II", view, base + (i * IBO_DWORDS + 4) * 4, lo, hi)

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
    """The compute state and the dispatch, in computerator's order (a6xx.c: cs_program_emit, cs_const_emit,
    cs_ibo_emit, a6xx_emit_grid); each register is in the README's table."""
    a, p, k = _a6xx(), _pm4(), self.kernel
    consts, ibos = Sym(V_CONSTS), Sym(V_IBOS)
    thread = a.ENUMS["a6xx_threadsize"]["THREAD64"]
    words = cp.pkt4(a.REG_A6XX_SP_MODE_CONTROL, a.A6XX_SP_MODE_CONTROL_CONSTANT_DEMOTION_ENABLE |
                    a.A6XX_SP_MODE_CONTROL_ISAMMODE(a.ENUMS["a6xx_isam_mode"]["ISAMMODE_GL"]))
    words += cp.pkt4(a.REG_A6XX_SP_PERFCTR_ENABLE, a.A6XX_SP_PERFCTR_ENABLE_CS)
    words += cp.pkt4(a.REG_A6XX_SP_FLOAT_CNTL, 0)
    words += cp.pkt4(a.REG_A6XX_HLSQ_INVALIDATE_CMD, a.A6XX_HLSQ_INVALIDATE_CMD_CS_STATE | a.A6XX_HLSQ_INVALIDATE_CMD_CS_IBO)
    words += cp.pkt4(a.REG_A6XX_HLSQ_CS_CNTL, a.A6XX_HLSQ_CS_CNTL_CONSTLEN(self.constlen) | a.A6XX_HLSQ_CS_CNTL_ENABLED)
    nibo = len(k.bufs)
    words += cp.pkt4(a.REG_A6XX_SP_CS_CONFIG, a.A6XX_SP_CS_CONFIG_ENABLED | a.A6XX_SP_CS_CONFIG_NIBO(nibo), self.units)
    # merged registers (half registers are halves of the full ones: a6xx's mode, and what the mock models); the
    # footprint counts half registers in the full ones, so HALFREGFOOTPRINT stays 0
    ctrl = a.A6XX_SP_CS_CTRL_REG0_THREADSIZE(thread) | a.A6XX_SP_CS_CTRL_REG0_FULLREGFOOTPRINT(self.full_regs) | \
      a.A6XX_SP_CS_CTRL_REG0_BRANCHSTACK(k.branchstack) | a.A6XX_SP_CS_CTRL_REG0_MERGEDREGS | \
      (a.A6XX_SP_CS_CTRL_REG0_EARLYPREAMBLE if k.early_preamble else 0)
    words += cp.pkt4(a.REG_A6XX_SP_CS_CTRL_REG0, ctrl)
    words += cp.pkt4(a.REG_A6XX_SP_CS_CTRL_REG1, a.A6XX_SP_CS_CTRL_REG1_SHARED_SIZE(shared_size_field(k.localmem or 1))
                     | a.A6XX_SP_CS_CTRL_REG1_CONSTANTRAMMODE(a.CONSTLEN_256))
    # the a630 has no LPAC (freedreno_devices.py): SP_CS_CNTL_0/1 and HLSQ_CS_CTRL_REG1 are not written there
    cntl0 = a.A6XX_HLSQ_CS_CNTL_0_WGIDCONSTID(k.wgid) | a.A6XX_HLSQ_CS_CNTL_0_WGSIZECONSTID(REGID_NONE) | \
      a.A6XX_HLSQ_CS_CNTL_0_WGOFFSETCONSTID(REGID_NONE) | a.A6XX_HLSQ_CS_CNTL_0_LOCALIDREGID(k.invocation_id)
    cntl1 = a.A6XX_HLSQ_CS_CNTL_1_LINEARLOCALIDREGID(REGID_NONE) | a.A6XX_HLSQ_CS_CNTL_1_THREADSIZE(thread)
    words += cp.pkt4(a.REG_A6XX_HLSQ_CS_CNTL_0, cntl0, cntl1)
    words += cp.pkt4(a.REG_A6XX_SP_CS_OBJ_START, self.code_va & 0xFFFFFFFF, self.code_va >> 32)
    words += cp.pkt4(a.REG_A6XX_SP_CS_INSTRLEN, self.units)
    # the shader is preloaded up to the instruction cache's size; the SP fetches the rest from SP_CS_OBJ_START
    # (computerator: shader_preload_size = MIN2(instrlen, instr_cache_size)), so NUM_UNIT's 10 bits never overflow
    words += cp.load_state6(p.ST6_SHADER, p.SB6_CS_SHADER, min(self.units, INSTR_CACHE), self.code_va)
    if k.pvtmem:
      per_fiber, per_sp = pvtmem_sizes(k.pvtmem)
      pvt_va = self.pvt
      words += cp.pkt4(a.REG_A6XX_SP_CS_PVT_MEM_PARAM, a.A6XX_SP_CS_PVT_MEM_PARAM_MEMSIZEPERITEM(per_fiber),
                       pvt_va & 0xFFFFFFFF, pvt_va >> 32, a.A6XX_SP_CS_PVT_MEM_SIZE_TOTALPVTMEMSIZE(per_sp))
      words += cp.pkt4(a.REG_A6XX_SP_CS_PVT_MEM_HW_STACK_OFFSET, a.A6XX_SP_CS_PVT_MEM_HW_STACK_OFFSET_OFFSET(per_sp))
    words += cp.load_state6(p.ST6_CONSTANTS, p.SB6_CS_SHADER, self.constlen, consts)
    if nibo:
      words += cp.load_state6(p.ST6_IBO, p.SB6_CS_SHADER, nibo, ibos)
      words += cp.pkt4(a.REG_A6XX_SP_CS_IBO, cp.lo(ibos), cp.hi(ibos)) + cp.pkt4(a.REG_A6XX_SP_CS_IBO_COUNT, nibo)
    words += cp.set_marker(p.RM6_COMPUTE)
    ndrange = a.A6XX_HLSQ_CS_NDRANGE_0_KERNELDIM(3) | a.A6XX_HLSQ_CS_NDRANGE_0_LOCALSIZEX(block[0] - 1) | \
      a.A6XX_HLSQ_CS_NDRANGE_0_LOCALSIZEY(block[1] - 1) | a.A6XX_HLSQ_CS_NDRANGE_0_LOCALSIZEZ(block[2] - 1)
    words += cp.pkt4(a.REG_A6XX_HLSQ_CS_NDRANGE_0, ndrange, grid[0] * block[0], 0, grid[1] * block[1], 0,
                     grid[2] * block[2], 0)
    words += cp.pkt4(a.REG_A6XX_HLSQ_CS_KERNEL_GROUP_X, 1, 1, 1)
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
  d[4], d[5] = ibo_base(va)
  return d


def ibo_base(va: int) -> tuple[int, int]:
  """An IBO descriptor's dwords 4 and 5: the base address (A6XX_TEX_CONST_4_BASE_LO, A6XX_TEX_CONST_5_BASE_HI)."""
  a = _a6xx()
  # BASE_LO drops 5 bits: KGSL objects are page-aligned
  return a.A6XX_TEX_CONST_4_BASE_LO(va & 0xFFFFFFE0), a.A6XX_TEX_CONST_5_BASE_HI(va >> 32)
