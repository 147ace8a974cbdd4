"""Generate the RDNA3 (gfx1100) instruction tables from LLVM: `python -m hcq.autogen.isa.gen_rdna3 [--arch gfx1100]`.

Nothing about instructions is typed by hand. For every microcode format in layouts.py (bit positions from AMD's ISA
document) the generator walks the whole opcode field: it builds a probe instruction with distinctive operand field
values, lets `llvm-mc-19 -disassemble -show-encoding` decode thousands of probes per call, and learns from the text:
- the LLVM mnemonic of every valid opcode and the instruction size (incl. a mandatory literal, e.g. v_fmamk_f32);
- the printed operand list as a template: each operand is traced back to the encoding field whose probe value it
  shows (so a field printed as `v[8:9]` is a 2-register VGPR operand, `s8` a scalar destination), fixed text such as
  `vcc_lo` or `off` is kept as text, simm16 operands get their printing style (hex, unsigned, waitcnt, ...);
- VOP3 opcodes whose bits 14:8 are a scalar destination (VOP3SD) and which modifiers each VOP3/VOP3P opcode accepts.
Output: autogen/isa/<arch>.py (data only). `--arch gfx1200` (RDNA4) walks the formats tabulated for it in
layouts.py (ALU, DS, SMEM, VFLAT/VSCRATCH/VGLOBAL, VBUFFER) and `--arch gfx942` (CDNA3: ALU, SMEM, DS, FLAT/SCRATCH/GLOBAL, MUBUF); a new
format or architecture needs its layout there, the walk is the same with -mcpu=<arch>. Regenerating takes ~30-90 s (tens of llvm-mc calls).
"""
from __future__ import annotations

import argparse
import os
import pprint
import re

from .layouts import LAYOUTS
from .llvm_oracle import disassemble
from .syntax import split_operands

# distinctive probe values: the printed register index tells which field an operand came from
PROBE = {
  "SOP2": dict(sdst=8, ssrc0=16, ssrc1=24),
  "SOPK": dict(sdst=8, simm16=0x1234),
  "SOP1": dict(sdst=8, ssrc0=16),
  "SOPC": dict(ssrc0=16, ssrc1=24),
  "SOPP": dict(simm16=0x1234),
  "SMEM": dict(sdata=8, sbase=12, offset=0x1234, soffset=0x7c),
  "VOP2": dict(vdst=8, src0=256 + 16, vsrc1=24),
  "VOP1": dict(vdst=8, src0=256 + 16),
  "VOPC": dict(src0=256 + 16, vsrc1=24),
  "VOP3": dict(vdst=8, src0=256 + 16, src1=256 + 24, src2=256 + 32),
  "VOP3SD": dict(vdst=8, sdst=12, src0=256 + 16, src1=256 + 24, src2=256 + 32),
  "VOP3P": dict(vdst=8, src0=256 + 16, src1=256 + 24, src2=256 + 32, opsel_hi=3, opsel_hi2=1),
  "VOPD": dict(vdstx=8, vdsty=6, srcx0=256 + 16, vsrcx1=24, srcy0=256 + 33, vsrcy1=43),
  "VINTERP": dict(vdst=8, src0=256 + 16, src1=256 + 24, src2=256 + 32),
  "LDSDIR": dict(vdst=8, attr=1, attr_chan=0),
  "DS": dict(vdst=8, addr=16, data0=24, data1=32),
  "MUBUF": dict(vdata=8, vaddr=16, srsrc=6, soffset=40, offen=1),
  "MTBUF": dict(vdata=8, vaddr=16, srsrc=6, soffset=40, offen=1, format=1),
  "MIMG": dict(vdata=8, vaddr=16, srsrc=6, ssamp=10, dmask=1),
  "FLAT": dict(vdst=8, addr=16, data=24, saddr=0x7c, seg=0),
  "SCRATCH": dict(vdst=8, addr=16, data=24, saddr=40, seg=1),
  "GLOBAL": dict(vdst=8, addr=16, data=24, saddr=0x7c, seg=2),
  # gfx12
  "VFLAT": dict(vdst=8, vaddr=16, vsrc=24, saddr=0x7c, seg=0),
  "VSCRATCH": dict(vdst=8, vaddr=16, vsrc=24, saddr=40, seg=1, sve=1),
  "VGLOBAL": dict(vdst=8, vaddr=16, vsrc=24, saddr=0x7c, seg=2),
  "VBUFFER": dict(vdata=8, vaddr=16, rsrc=24, soffset=40, offen=1, format=1),
}
# appended after every probe: an instruction that always takes a literal shows it; its top bits 111111 are no gfx11
# encoding, so when llvm-mc rejects a probe it cannot mistake the literal for one
LITERAL_PROBE = 0xFF2B1C0D

REGISTER_FIELDS = {"sdst", "ssrc0", "ssrc1", "sdata", "sbase", "soffset", "vdst", "src0", "src1", "src2", "vsrc1",
                   "vdstx", "vdsty", "srcx0", "vsrcx1", "srcy0", "vsrcy1", "addr", "data", "data0", "data1", "saddr",
                   "vaddr", "vdata", "srsrc", "ssamp", "vsrc", "rsrc"}
_REG = re.compile(r"^(v|s|ttmp|a)(?:(\d+)|\[(\d+):(\d+)\])$")


def encode_fields(layout: dict, values: dict) -> bytes:
  word = 0
  for ident_lo, ident_w, ident_v in layout["ident"]:
    word |= ident_v << ident_lo
  for name, lo, width in layout["fields"]:
    v = values.get(name, 0)
    assert 0 <= v < (1 << width), (name, v)
    word |= v << lo
  return word.to_bytes(layout["size"], "little")


def field_candidates(enc: str, values: dict) -> list[tuple[str, str, int]]:
  """(field, register class, printed index) for every register-valued field of a probe."""
  out = []
  for name, v in values.items():
    if name not in REGISTER_FIELDS: continue
    if name in ("sbase",): out.append((name, "s", 2 * v))
    elif name in ("srsrc", "ssamp"): out.append((name, "s", 4 * v))
    elif name == "vdsty": out.append((name, "v", (v << 1) | (~values["vdstx"] & 1)))
    elif name.startswith(("src", "ssrc", "soffset", "saddr")) and not name.startswith("srsrc"):
      if v >= 256: out.append((name, "v", v - 256)); out.append((name, "a", v - 256))
      elif 0 < v < 106: out.append((name, "s", v))
    elif name in ("sdst", "sdata", "rsrc"): out.append((name, "s", v))
    else:  # 8-bit register fields: VGPR, SGPR for readlane-like, AGPR for CDNA accumulation registers
      out.append((name, "v", v)); out.append((name, "s", v)); out.append((name, "a", v))
  return out


def learn_template(enc: str, values: dict, text: str) -> tuple[str, list, list[str]]:
  mnem, ops, mods = split_operands(text)
  cands = field_candidates(enc, values)
  template = []
  for op in ops:
    m16 = re.match(r"^v(\d+)\.([lh])$", op)  # true16 register halves (v_mov_b16_e32 v8.l, v16.h)
    if m16:
      hits = [f for f, c, idx in cands if c == "v" and idx == int(m16.group(1))]
      if len(hits) == 1:
        template.append(("reg", hits[0], "v16", 1))
        continue
    m = _REG.match(op)
    if m:
      cls = m.group(1)
      lo = int(m.group(2) if m.group(2) is not None else m.group(3))
      count = 1 if m.group(2) is not None else int(m.group(4)) - lo + 1
      hits = [f for f, c, idx in cands if c == cls and idx == lo]
      if len(hits) == 1:
        template.append(("reg", hits[0], cls, count))
        continue
    simm = values.get("simm16")
    if simm is not None:
      kind = simm16_kind(op, simm)
      if kind:
        template.append(("simm16", kind))
        continue
    if enc == "SMEM" and op == str(values.get("sdata")):
      template.append(("imm", "sdata"))
      continue
    if op.startswith("sendmsg(") and "ssrc0" in values:
      template.append(("sendmsg_rtn", "ssrc0"))
      continue
    if enc == "SMEM" and op == hex(values["offset"]):
      template.append(("imm", "offset"))
      continue
    if op == hex(LITERAL_PROBE):
      template.append(("literal",))
      continue
    template.append(("text", op))
  return mnem, template, mods


def simm16_kind(text: str, value: int) -> str | None:
  if text == hex(value): return "hex"
  if text == str(value): return "udec"
  if text.startswith(("vmcnt", "expcnt", "lgkmcnt")): return "waitcnt"
  if text.startswith(("instid", "instskip")): return "delay_alu"
  if text.startswith("sendmsg"): return "sendmsg"
  if text.startswith("hwreg"): return "hwreg"
  return None


def classify(layouts: dict, word: int) -> str | None:
  """The encoding whose identifying bits match (the most specific one wins: SOPP inside SOPK inside SOP2)."""
  best, best_w = None, -1
  for enc, layout in layouts.items():
    if enc == "VOP3SD": continue
    if all(((word >> lo) & ((1 << w) - 1)) == v for lo, w, v in layout["ident"]):
      width = sum(w for _, w, _ in layout["ident"])
      if width > best_w: best, best_w = enc, width
  return best


def field_value(layout: dict, data: bytes, name: str) -> int:
  word = int.from_bytes(data[:layout["size"]], "little")
  for fname, lo, width in layout["fields"]:
    if fname == name: return (word >> lo) & ((1 << width) - 1)
  raise KeyError(name)


ALT_SGPR = {"src0": 40, "src1": 44, "src2": 48, "srcx0": 40, "srcy0": 44}


def zero_sets(values: dict) -> list[dict]:
  """Variants of the probe, fewest changes first: llvm-mc rejects some opcodes when a field that the instruction
  does not use is not zero (e.g. src2 of a 2-source VOP3), or when a source must be scalar (v_readlane_b32's lane)."""
  import itertools
  names = [k for k, v in values.items() if v and k not in ("seg", "opsel_hi", "opsel_hi2")]
  choices = [[values[k]] + ([ALT_SGPR[k]] if k in ALT_SGPR else []) + [0] for k in names]
  variants = []
  for combo in itertools.product(*choices):
    changed = sum(1 for k, c in zip(names, combo) if c != values[k])
    variants.append((changed, dict(values, **dict(zip(names, combo)))))
  variants.sort(key=lambda t: t[0])
  return [v for _, v in variants]


# per-architecture probe values where a format differs
# gfx942: SMEM's offset is used only with IMM; a 7-bit FLAT SADDR of 0x7f is "off"; SCRATCH's SVE says VADDR is used
PROBE_ARCH = {"gfx942": {"SMEM": dict(sdata=8, sbase=12, offset=0x1234, imm=1),
                         "FLAT": dict(PROBE["FLAT"], saddr=0x7f), "GLOBAL": dict(PROBE["GLOBAL"], saddr=0x7f),
                         "SCRATCH": dict(PROBE["SCRATCH"], sve=1)}}


def walk_opcodes(arch: str, enc: str, layout: dict, values: dict, mcpu: str) -> dict[int, dict]:
  layouts = LAYOUTS[arch]
  opname = layout["op"]
  opfield = [f for f in layout["fields"] if f[0] == opname][0]
  pending = list(range(1 << opfield[2]))
  table = {}
  for vals in zero_sets(values):
    if not pending: break
    probes = []
    for op in pending:
      probes.append(encode_fields(layout, dict(vals, **{opname: op})) + LITERAL_PROBE.to_bytes(4, "little"))
    results = disassemble(probes, mcpu)
    still = []
    for op, probe, res in zip(pending, probes, results):
      ok = False
      if res and "Invalid register" not in res[0][0]:
        text, encoding = res[0]
        word = int.from_bytes(encoding[:4], "little")
        cls = classify(layouts, word)
        if len(encoding) >= layout["size"] and (cls == enc or (enc == "VOP3SD" and cls == "VOP3")) \
            and field_value(layout, encoding, opname) == op:
          v = dict(vals, **{opname: op})
          mnem, template, mods = learn_template(enc, v, text)
          table[op] = dict(name=mnem, size=len(encoding), operands=template, probe_mods=mods)
          ok = True
      if not ok: still.append(op)
    pending = still
  return table


def walk_vopd(layout: dict, mcpu: str) -> dict:
  """VOPD: name each OPX and OPY by probing (opx, opy) pairs; operands an opcode does not read must be zero."""
  import itertools
  base = PROBE["VOPD"]
  xs, ys = {}, {}
  for sx0, sx1, sy0, sy1 in itertools.product((base["srcx0"], 40, 0), (base["vsrcx1"], 0),
                                              (base["srcy0"], 44, 0), (base["vsrcy1"], 0)):
    values = dict(base, srcx0=sx0, vsrcx1=sx1, srcy0=sy0, vsrcy1=sy1)
    keys = [(x, y) for x in range(16) for y in range(32) if x not in xs or y not in ys]
    if not keys: break
    probes = [encode_fields(layout, dict(values, opx=x, opy=y)) + LITERAL_PROBE.to_bytes(4, "little") for x, y in keys]
    for (opx, opy), probe, res in zip(keys, probes, disassemble(probes, mcpu)):
      if not res or "Invalid register" in res[0][0] or " :: " not in res[0][0]: continue
      text, encoding = res[0]
      if encoding[:8] != probe[:8] and (int.from_bytes(encoding[:4], "little") >> 17) != (int.from_bytes(probe[:4], "little") >> 17):
        continue
      xtext, _, ytext = text.partition(" :: ")
      v = dict(values, opx=opx, opy=opy)
      if opx not in xs:
        xm, xt, _ = learn_template("VOPD", v, xtext)
        xs[opx] = dict(name=xm, operands=xt)
      if opy not in ys:
        ym, yt, _ = learn_template("VOPD", v, ytext)
        ys[opy] = dict(name=ym, operands=yt)
  return {"X": xs, "Y": ys}


SIMM16_SAMPLES = (0, 3, 64, 65, 0x1234, 0xfff0)


def _simm16_style(texts: list[str | None]) -> str | None:
  """Printing style of a plain 16-bit immediate from its texts for SIMM16_SAMPLES (None = operand omitted)."""
  styles = {
    "hex": lambda v: f"0x{v:x}",
    "udec": lambda v: str(v),
    "sdec": lambda v: str(v - 0x10000 if v & 0x8000 else v),
    "u16": lambda v: str(v) if v <= 64 else f"0x{v:x}",
  }
  for name, fn in styles.items():
    if all(t is None or t == fn(v) for v, t in zip(SIMM16_SAMPLES, texts)) and texts[-1] is not None:
      return name
  return None


def refine_simm16(arch: str, tables: dict) -> None:
  """Probe every SOPP/SOPK opcode with several simm16 values: plain immediates get a style (hex, decimal, ...) and
  the flag opt0 when LLVM omits a zero immediate (s_endpgm)."""
  layouts = LAYOUTS[arch]
  for enc in ("SOPP", "SOPK"):
    layout = layouts[enc]
    items = [(op, e) for op, e in tables[enc].items() if any(t[0] == "simm16" for t in e["operands"])]
    probes = []
    for op, _ in items:
      for v in SIMM16_SAMPLES:
        probes.append(encode_fields(layout, dict(PROBE[enc], op=op, simm16=v)) + LITERAL_PROBE.to_bytes(4, "little"))
    results = disassemble(probes, arch)
    for i, (op, e) in enumerate(items):
      texts = []
      for res in results[i * len(SIMM16_SAMPLES):(i + 1) * len(SIMM16_SAMPLES)]:
        if not res: texts.append("<invalid>"); continue
        _, ops, _ = split_operands(res[0][0])
        idx = [j for j, t in enumerate(e["operands"]) if t[0] == "simm16"][0]
        texts.append(ops[idx] if idx < len(ops) else None)
      kind = [t for t in e["operands"] if t[0] == "simm16"][0][1]
      if any(t and t.startswith("sendmsg(") for t in texts): kind = "sendmsg"
      elif kind in ("hex", "udec"):
        style = _simm16_style(texts)
        if style is None:  # a symbolic syntax we do not model (s_waitcnt_depctr): hex is its fallback spelling
          print(f"note: {e['name']}: simm16 printed as {texts}; using hex")
          style = "hex"
        kind = style
      new = ("simm16", kind, texts[0] is None)
      e["operands"] = [new if t[0] == "simm16" else t for t in e["operands"]]


def symbolic_tables(arch: str, tables: dict) -> dict:
  """Names LLVM prints for s_sendmsg message values, hwreg ids and MTBUF formats."""
  layouts = LAYOUTS[arch]
  out = {"SENDMSG": {}, "HWREG": {}, "BUF_FORMAT": {}, "SENDMSG_RTN": {}}
  rtn = [op for op, e in tables["SOP1"].items() if e["name"] == "s_sendmsg_rtn_b32"]
  probes = [encode_fields(layouts["SOP1"], dict(op=rtn[0], sdst=8, ssrc0=v)) for v in range(256)] if rtn else []
  for v, res in enumerate(disassemble(probes, arch) if probes else []):
    if res and "sendmsg(" in res[0][0]: out["SENDMSG_RTN"][v] = res[0][0].split("sendmsg(", 1)[1].rstrip(")")
  sendmsg = [op for op, e in tables["SOPP"].items() if e["name"] == "s_sendmsg"][0]
  probes = [encode_fields(layouts["SOPP"], dict(op=sendmsg, simm16=v)) for v in range(1024)]
  for v, res in enumerate(disassemble(probes, arch)):
    if res and "sendmsg(" in res[0][0]: out["SENDMSG"][v] = res[0][0].split("sendmsg(", 1)[1].rstrip(")")
  getreg = [op for op, e in tables["SOPK"].items() if e["name"] == "s_getreg_b32"][0]
  probes = [encode_fields(layouts["SOPK"], dict(op=getreg, sdst=8, simm16=(31 << 11) | v)) for v in range(64)]
  for v, res in enumerate(disassemble(probes, arch)):
    if res and "hwreg(" in res[0][0]:
      name = res[0][0].split("hwreg(", 1)[1].rstrip(")").split(",")[0]
      if not name.isdigit(): out["HWREG"][v] = name
  if "VGLOBAL" in tables:  # gfx12 cache-policy names: th:TH_LOAD_NT, scope:SCOPE_SYS (per load/store/atomic)
    out["TH"], out["SCOPE"] = {}, {}
    layout = layouts["VGLOBAL"]
    for kind, opname in (("load", "global_load_b32"), ("store", "global_store_b32"), ("atomic", "global_atomic_add_u32")):
      op = [o for o, e in tables["VGLOBAL"].items() if e["name"] == opname][0]
      # the name can depend on the scope too (TH_LOAD_BYPASS, TH_ATOMIC_CASCADE_*): key = th | scope << 3
      probes = [encode_fields(layout, dict(PROBE["VGLOBAL"], op=op, th=v & 7, scope=v >> 3)) for v in range(32)]
      out["TH"][kind] = {}
      for v, res in enumerate(disassemble(probes, arch)):
        if res and "th:" in res[0][0]: out["TH"][kind][v] = res[0][0].split("th:", 1)[1].split()[0]
    op = [o for o, e in tables["VGLOBAL"].items() if e["name"] == "global_load_b32"][0]
    probes = [encode_fields(layout, dict(PROBE["VGLOBAL"], op=op, scope=v)) for v in range(4)]
    for v, res in enumerate(disassemble(probes, arch)):
      if res and "scope:" in res[0][0]: out["SCOPE"][v] = res[0][0].split("scope:", 1)[1].split()[0]
  fmt_enc = "MTBUF" if "MTBUF" in tables else "VBUFFER"
  if fmt_enc not in tables: return out
  tload = [op for op, e in tables[fmt_enc].items() if e["name"] == "tbuffer_load_format_x"][0]
  probes = [encode_fields(layouts[fmt_enc], dict(PROBE[fmt_enc], op=tload, format=v)) for v in range(128)]
  for v, res in enumerate(disassemble(probes, arch)):
    if res and "format:[" in res[0][0]: out["BUF_FORMAT"][v] = res[0][0].split("format:[", 1)[1].split("]")[0]
  return out


SOURCE_FIELDS = ("src0", "src1", "src2", "ssrc0", "ssrc1")
MFMA_PREFIXES = ("v_mfma", "v_smfmac")


def refine_sources(arch: str, tables: dict) -> None:
  """Probe each source with a literal: LLVM prints only 16 bits of a literal given to a 16-bit operand; such
  sources are listed in the entry's 'lit16'."""
  layouts = LAYOUTS[arch]
  for enc in ("SOP2", "SOP1", "SOPC", "VOP1", "VOP2", "VOPC", "VOP3", "VOP3SD", "VOP3P"):
    layout = layouts[enc]
    jobs, probes = [], []
    for op, e in tables[enc].items():
      regs = [t for t in e["operands"] if t[0] == "reg" and t[1] in SOURCE_FIELDS]
      e["lit16"] = []
      if e["name"].startswith(MFMA_PREFIXES): continue   # no literal sources; llvm-mc-19 crashes on such probes
      for i, t in enumerate(regs):
        vals = {x[1]: (256 + 20 + 10 * j if x[1].startswith("src") else 20 + 4 * j) for j, x in enumerate(regs)}
        for x in e["operands"]:
          if x[0] == "reg" and x[1] not in SOURCE_FIELDS: vals[x[1]] = PROBE[enc].get(x[1], 0)
        if enc == "VOP3P": vals.update(opsel_hi=3, opsel_hi2=1)
        vals[t[1]] = 255
        probes.append(encode_fields(layout, dict(vals, op=op)) + LITERAL_PROBE.to_bytes(4, "little"))
        jobs.append((e, t[1]))
    for (e, field), res in zip(jobs, disassemble(probes, arch)):
      if res and hex(LITERAL_PROBE & 0xffff) in res[0][0].replace(",", " ").split():
        e["lit16"].append(field)
    # 16-bit integer operands print inline float constants as f16 bit patterns (1.0 -> 0x3c00): 'f16hex'
    jobs2, probes2 = [], []
    for (e, field), probe in zip(jobs, probes):
      if field not in e["lit16"]: continue
      p = bytearray(probe)
      word = int.from_bytes(p[:layout["size"]], "little")
      lo, width = [(lo, w) for n, lo, w in layout["fields"] if n == field][0]
      word = (word & ~(((1 << width) - 1) << lo)) | (242 << lo)
      probes2.append(word.to_bytes(layout["size"], "little"))
      jobs2.append((e, field))
    for (e, field), res in zip(jobs2, disassemble(probes2, arch)):
      if res and "0x3c00" in res[0][0].replace(",", " ").split():
        e.setdefault("f16hex", []).append(field)


def refine_modifiers(arch: str, tables: dict) -> None:
  """Which NEG/ABS source modifiers each VOP3 opcode has, per source: float sources print -x and |x|, integer
  ones sext(x), others none (LLVM ignores the bit). Probes one bit at a time; 'srcmods' = {src: [kinds]}."""
  for enc in ("VOP3", "VOP3SD"):
    layout = LAYOUTS[arch][enc]
    jobs, probes = [], []
    for op in sorted(tables[enc]):
      vals = {t[1]: (ALT_SGPR[t[1]] if t[2] == "s" and t[1] in ALT_SGPR else PROBE[enc][t[1]])
              for t in tables[enc][op]["operands"] if t[0] == "reg"}
      if tables[enc][op]["name"].startswith("v_cmpx_"): vals["vdst"] = 126  # implicit EXEC destination
      tables[enc][op]["srcmods"] = {}
      for i in range(3):
        if f"src{i}" not in vals: continue
        tables[enc][op]["srcmods"][f"src{i}"] = []
        for mod in (("neg", "abs") if enc == "VOP3" else ("neg",)):
          probes.append(encode_fields(layout, dict(vals, op=op, **{mod: 1 << i})))
          jobs.append((op, i, mod))
    for (op, i, mod), probe, res in zip(jobs, probes, disassemble(probes, arch)):
      if not res or not probe.startswith(res[0][1][:4]): continue
      _, operands, _ = split_operands(res[0][0])
      srcs = [t for t in tables[enc][op]["operands"] if t[0] in ("reg", "text")]
      idx = [k for k, t in enumerate(srcs) if t[0] == "reg" and t[1] == f"src{i}"]
      if not idx or idx[0] >= len(operands): continue
      text = operands[idx[0]]
      kinds = tables[enc][op]["srcmods"][f"src{i}"]
      if mod == "neg" and text.startswith("sext("): kinds.append("sext")
      elif mod == "neg" and text.startswith("-"): kinds.append("neg")
      elif mod == "abs" and text.startswith("|"): kinds.append("abs")


def refine_mimg(arch: str, tables: dict) -> None:
  """MIMG: the number of address VGPRs of each opcode for each DIM value (0..7), None where LLVM rejects it; and the
  same with A16 set (16-bit addresses, packed two to a VGPR as LLVM counts them) as vaddr_by_dim_a16."""
  if "MIMG" not in tables: return
  layout = LAYOUTS[arch]["MIMG"]
  ops = sorted(tables["MIMG"])
  probes = []
  for op in ops:
    vals = {t[1]: PROBE["MIMG"][t[1]] for t in tables["MIMG"][op]["operands"] if t[0] == "reg"}
    probes += [encode_fields(layout, dict(vals, op=op, dim=d, dmask=1, a16=a16)) for a16 in (0, 1) for d in range(8)]
  res = disassemble(probes, arch)
  for i, op in enumerate(ops):
    for a16, key in ((0, "vaddr_by_dim"), (1, "vaddr_by_dim_a16")):
      counts = []
      for d in range(8):
        r = res[i * 16 + a16 * 8 + d]
        count = None
        if r and "Invalid" not in r[0][0]:
          _, operands, _ = split_operands(r[0][0])
          m = _REG.match(operands[1]) if len(operands) > 1 else None
          if m and m.group(1) == "v": count = 1 if m.group(2) is not None else int(m.group(4)) - int(m.group(3)) + 1
        counts.append(count)
      tables["MIMG"][op][key] = counts


def refine_returning(arch: str, tables: dict) -> None:
  """FLAT/GLOBAL/SCRATCH/MUBUF atomics return the old value (and name a vdst) when GLC is set: learn that template
  as 'operands_glc'."""
  layouts = LAYOUTS[arch]
  for enc in ("FLAT", "GLOBAL", "SCRATCH", "MUBUF", "VFLAT", "VGLOBAL", "VSCRATCH", "VBUFFER"):
    if enc not in tables: continue
    layout = layouts[enc]
    ops = sorted(tables[enc])
    # gfx11: GLC=1; gfx12: th bit 0 (TH_ATOMIC_RETURN); gfx942: SC0=1
    names = {f for f, _, _ in layout["fields"]}
    flag = dict(glc=1) if "glc" in names else dict(sc0=1) if "sc0" in names else dict(th=1)
    probe = PROBE_ARCH.get(arch, {}).get(enc, PROBE[enc])
    probes = [encode_fields(layout, dict(probe, op=op, **flag)) for op in ops]
    for op, res in zip(ops, disassemble(probes, arch)):
      if not res: continue
      mnem, template, _ = learn_template(enc, dict(probe, op=op, **flag), res[0][0])
      if template != tables[enc][op]["operands"] and mnem == tables[enc][op]["name"]:
        tables[enc][op]["operands_glc"] = template


def generate(arch: str = "gfx1100") -> dict:
  layouts = LAYOUTS[arch]
  tables: dict = {}
  for enc, layout in layouts.items():
    if enc in ("VOPD", "EXP", "VOP3SD"): continue
    tables[enc] = walk_opcodes(arch, enc, layout, PROBE_ARCH.get(arch, {}).get(enc, PROBE[enc]), arch)
  # VOP3SD: opcodes whose bits 14:8 print as a scalar destination
  sd = walk_opcodes(arch, "VOP3SD", layouts["VOP3SD"], PROBE["VOP3SD"], arch)
  tables["VOP3SD"] = {op: e for op, e in sd.items() if any(t[0] == "reg" and t[1] == "sdst" for t in e["operands"])}
  for op in tables["VOP3SD"]: tables["VOP3"].pop(op, None)
  if "VOPD" in layouts: tables["VOPD"] = walk_vopd(layouts["VOPD"], arch)
  refine_simm16(arch, tables)
  refine_sources(arch, tables)
  refine_returning(arch, tables)  # gfx11 (GLC); gfx12 atomics return with th:TH_ATOMIC_RETURN: not learned yet
  refine_modifiers(arch, tables)
  refine_mimg(arch, tables)
  return tables


def _immutable(x):
  """The tables with every list as a tuple: the module's data is never changed after import, and a tuple of constants
  (unlike a list) drops out of the garbage collector's tracking, so that these ~7,000 containers are not walked again
  by each full collection and at interpreter exit (issue 33 P3, a new process's cold start)."""
  if isinstance(x, dict): return {k: _immutable(v) for k, v in x.items()}
  if isinstance(x, (list, tuple)): return tuple(_immutable(v) for v in x)
  return x


def write_module(arch: str, tables: dict, path: str, symbolic: dict | None = None) -> None:
  tables, symbolic = _immutable(tables), _immutable(symbolic or {})
  with open(path, "w") as f:
    f.write(f'"""Instruction tables for {arch}: GENERATED by autogen/isa/gen_rdna3.py from llvm-mc-19. Do not edit.\n\n')
    f.write("OPS[encoding][opcode] = {name, size, operands, probe_mods}; operands is the printed operand template:\n")
    f.write("  ('reg', field, 'v'|'s'|'ttmp', count)  a register operand taken from an encoding field\n")
    f.write("  ('simm16', kind, opt0)                the 16-bit immediate printed as hex|udec|sdec|u16 (decimal to 64,\n")
    f.write("                                        then hex)|waitcnt|delay_alu|sendmsg|hwreg; opt0: omitted when zero\n")
    f.write("  ('imm', field) / ('literal',)         an immediate field / the trailing 32-bit literal\n")
    f.write("  ('text', str)                         fixed text (vcc_lo, off, ...)\n")
    f.write('VOPD is {"X": {opx: ...}, "Y": {opy: ...}}. Field layouts: LAYOUTS (from layouts.py)."""\n')
    f.write("from .layouts import LAYOUTS as _L\n\nARCH = %r\nLAYOUTS = _L[%r]\n\n" % (arch, arch))
    f.write("OPS = ")
    f.write(pprint.pformat(tables, width=140, sort_dicts=True))
    f.write("\n")
    for name, table in symbolic.items():
      f.write(f"\n{name} = ")
      f.write(pprint.pformat(table, width=140, sort_dicts=True))
      f.write("\n")


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--arch", default="gfx1100")
  ap.add_argument("-o", "--output")
  args = ap.parse_args()
  tables = generate(args.arch)
  out = args.output or os.path.join(os.path.dirname(os.path.abspath(__file__)), f"{args.arch}.py")
  write_module(args.arch, tables, out, symbolic_tables(args.arch, tables))
  counts = {enc: (len(t["X"]) * len(t["Y"]) if enc == "VOPD" else len(t)) for enc, t in tables.items()}
  print(f"wrote {out}: {counts}")


if __name__ == "__main__":
  main()
