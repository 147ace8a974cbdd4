"""PTX text -> PTXModule ("Parallel Thread Execution ISA" 7.x/8.x: the subset clang-19's NVPTX back-end and hcq's
compiler/backend/ptx.py emit).

The text is cut into statements at ';', '{' and '}' (an initializer's braces stay inside its statement), labels
("name:") are split off the statement they lead, and each statement is a directive (.version, .entry, .reg, .shared,
...) or an instruction: [@[!]pred] opcode{.mod} operand, ...
"""
from __future__ import annotations

import hashlib
import re
import struct

import numpy as np

from .model import DTYPES, TYPE_BYTES, Instr, Operand, Param, PTXError, PTXKernel, PTXModule, Variable

# what the mock reads at most (a text, registers per kernel: PTX's virtual registers, far past the 255 per thread a
# GPU has) and the largest variable per state space: 228 KiB of shared memory per SM (Hopper), 512 KiB of local memory
# per thread (CUDA's limit), 64 MiB for a module's .global/.const data
MAX_TEXT = 16 << 20          # parsed at about 2 MB/s at worst (bench/ptx_interp.py --parse): a few seconds
MAX_REGS = 1 << 20
MAX_INSTRUCTION = 16 << 10    # characters of one instruction (the longest real ones, a wgmma's register vectors,
                              # are about 1 KiB); a declaration's initializer may be longer
MAX_VARIABLE_BYTES = {"shared": 228 << 10, "local": 512 << 10, "global": 64 << 20, "const": 64 << 20, "param": 64 << 10}

_LABEL = re.compile(r"^\s*([A-Za-z_$][\w$]*)\s*:(?!:)")
_IDENT = re.compile(r"^[A-Za-z_$%][\w$.]*$")
_SREG = re.compile(r"^%(tid|ntid|ctaid|nctaid)(\.[xyz])?$|^%(laneid|warpid|nwarpid|smid|nsmid|gridid|clock|clock64|"
                   r"clock_hi|globaltimer|globaltimer_lo|globaltimer_hi|lanemask_eq|lanemask_le|lanemask_lt|"
                   r"lanemask_ge|lanemask_gt|dynamic_smem_size|total_smem_size|aggr_smem_size|is_explicit_cluster|"
                   r"cluster_ctarank|cluster_nctarank|envreg\d+)$")
_IGNORED = {".loc", ".file", ".pragma", ".section", ".weak", ".extern_func", ".maxnreg", ".minnctapersm",
            ".noreturn", ".explicitcluster", ".reqnctapercluster", ".maxclusterrank", ".alias"}


def _strip_comments(text: str) -> str:
  # keep newlines inside /* */ so that line numbers stay right
  text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
  return re.sub(r"//[^\n]*", "", text)


def _opens_scope(before: str) -> bool:
  """Whether a '{' opens a scope (a kernel body, a nested block) rather than an initializer or a vector operand:
  it does at the start of a statement, after a label, and after a kernel header."""
  return before == "" or before.endswith(":") or ".entry" in before.split() or ".func" in before.split() or \
    before.startswith((".maxntid", ".reqntid", ".minnctapersm", ".maxnreg", ".pragma"))


_SPECIAL = re.compile(r"[;{}\n]")
_BRACES = re.compile(r"[{}]")


def _statements(text: str):
  """Yield (line, statement) with '{' and '}' as statements of their own. Linear in the text's length: the scan
  jumps from one ';', '{', '}' or newline to the next (a regular expression's search), a statement is the slice of
  the text since its start, and what it holds (its first and last non-blank characters) is tracked as it goes."""
  line, start = 1, 1
  i, n = 0, len(text)
  first = -1            # the current statement's first non-blank character (-1: none yet)
  last = ""             # its last non-blank character
  while i < n:
    m = _SPECIAL.search(text, i)
    j = m.start() if m else n
    if j > i:             # ordinary characters text[i:j] (no newline among them)
      seg = text[i:j]
      body = seg.strip()
      if body:
        if first < 0: first, start = i + (len(seg) - len(seg.lstrip())), line
        last = body[-1]
    if m is None: break
    c, i = text[j], j
    if c == "\n":
      line += 1
      if first >= 0 and text.startswith((".version", ".target", ".address_size"), first):   # end at the line's end
        yield start, text[first:i].strip()
        first, last = -1, ""
      i += 1
      continue
    if c == ";" or c == "}" or (c == "{" and _opens_scope_at(text, first, i, last)):
      if first >= 0: yield start, text[first:i].strip()
      if c != ";": yield line, c
      i += 1
      first, last = -1, ""
      continue
    # "{" of an initializer or a vector operand: copy through its matching brace
    if first < 0: first, start = i, line
    depth, k = 0, i
    while True:
      mb = _BRACES.search(text, k)
      if mb is None:
        k = n
        break
      depth += 1 if mb.group() == "{" else -1
      k = mb.end()
      if depth == 0: break
    line += text.count("\n", i, k)
    i, last = k, "}"
  if first >= 0: raise PTXError("statement without ';' at the end of the text", start, text[first:first + 200])


def _opens_scope_at(text: str, first: int, i: int, last: str) -> bool:
  """_opens_scope for the statement text[first:i], from what the scan tracked (its first and last non-blank
  characters); the word test of a kernel header looks at the statement's first 4 KiB only (a header is short)."""
  if first < 0 or last == ":": return True
  if text.startswith((".maxntid", ".reqntid", ".minnctapersm", ".maxnreg", ".pragma"), first): return True
  words = text[first:min(i, first + 4096)].split()
  return ".entry" in words or ".func" in words


def _int(tok: str) -> int:
  t = tok.strip()
  neg = t.startswith("-")
  if neg: t = t[1:]
  if t.endswith(("U", "u")): t = t[:-1]
  if t[:2] in ("0x", "0X"): v = int(t[2:], 16)
  elif t[:2] in ("0b", "0B"): v = int(t[2:], 2)
  elif len(t) > 1 and t[0] == "0" and t.isdigit(): v = int(t, 8)
  else: v = int(t)
  return -v if neg else v


def _number(tok: str):
  """An immediate: integer, 0fXXXXXXXX (f32 bits), 0dXXXXXXXXXXXXXXXX (f64 bits), or a decimal float."""
  t = tok.strip()
  neg = t.startswith("-")
  u = t[1:] if neg else t
  if re.fullmatch(r"0[fF][0-9A-Fa-f]{8}", u):
    v = struct.unpack("<f", struct.pack("<I", int(u[2:], 16)))[0]
    return -v if neg else v
  if re.fullmatch(r"0[dD][0-9A-Fa-f]{16}", u):
    v = struct.unpack("<d", struct.pack("<Q", int(u[2:], 16)))[0]
    return -v if neg else v
  try: return _int(t)
  except ValueError: return float(t)


def _init_number(tok: str):
  """An initializer's value: a plain decimal integer at once, anything else as _number reads it."""
  try: return int(tok)
  except ValueError: return _number(tok)


def _split_commas(s: str) -> list[str]:
  out, depth, cur = [], 0, []
  for c in s:
    if c in "{[(": depth += 1
    if c in "}])": depth -= 1
    if c == "," and depth == 0:
      out.append("".join(cur).strip())
      cur = []
    else: cur.append(c)
  if "".join(cur).strip(): out.append("".join(cur).strip())
  return out


def _operand(tok: str, line: int, text: str) -> Operand:
  t = tok.strip()
  if t.startswith("{") and t.endswith("}"):
    return Operand("vec", items=[_operand(x, line, text) for x in _split_commas(t[1:-1])])
  if t.startswith("[") and t.endswith("]"):
    inner = t[1:-1].replace(" ", "").replace("\t", "")
    m = re.fullmatch(r"([A-Za-z_$%][\w$.]*)?(?:\+?(-?(?:0[xX][0-9A-Fa-f]+|\d+)))?", inner)
    if not m or not (m.group(1) or m.group(2)): raise PTXError(f"unsupported address {t}", line, text)
    base = _operand(m.group(1), line, text) if m.group(1) else None
    return Operand("addr", base=base, value=_int(m.group(2)) if m.group(2) else 0)
  if "|" in t: return Operand("pair", items=[_operand(x, line, text) for x in t.split("|")])
  if t == "_": return Operand("sink")
  if t.startswith("!"):
    o = _operand(t[1:], line, text)
    o.neg = True
    return o
  if _SREG.match(t): return Operand("sreg", name=t)
  if t.startswith("%"): return Operand("reg", name=t)
  if re.match(r"^-?(0[fFdD][0-9A-Fa-f]+|0[xXbB][0-9A-Fa-f]+U?|\d+U?|\d*\.\d+([eE][-+]?\d+)?)$", t):
    return Operand("imm", value=_number(t))
  m = re.fullmatch(r"([A-Za-z_$][\w$]*)\s*(?:\+\s*(-?\d+))?", t)
  if m: return Operand("sym", name=m.group(1), value=int(m.group(2) or 0))
  shown = t if len(t) <= 80 else f"{t[:80]}... ({len(t)} characters)"
  raise PTXError(f"cannot read operand {shown!r}", line, text)


def _instruction(stmt: str, line: int) -> Instr:
  if len(stmt) > MAX_INSTRUCTION:
    raise PTXError(f"an instruction of {len(stmt)} characters: the mock reads at most {MAX_INSTRUCTION}", line, stmt)
  s = stmt.strip()
  guard = None
  if s.startswith("@"):
    m = re.match(r"@(!?)(%[\w$]+)\s+", s)
    if not m: raise PTXError("bad guard predicate", line, stmt)
    guard = (m.group(2), m.group(1) == "!")
    s = s[m.end():]
  m = re.match(r"([a-z][\w.:]*)\s*(.*)$", s, re.S)
  if not m: raise PTXError("not an instruction", line, stmt)
  parts = m.group(1).split(".")
  ops = [_operand(x, line, stmt) for x in _split_commas(m.group(2))] if m.group(2).strip() else []
  return Instr(parts[0], parts[1:], ops, guard, line, stmt)


def _decl_tokens(stmt: str):
  """'.shared .align 4 .b8 name[512] = {...}' -> (words, name, count or None for [], init text or None)."""
  init = None
  if "=" in stmt:
    stmt, init = stmt.split("=", 1)
  m = re.match(r"^(.*?)([A-Za-z_$%][\w$]*)\s*((?:\[\s*\d*\s*\])*)(<\d+>)?\s*$", stmt.strip(), re.S)
  if not m: return None
  words = m.group(1).split()
  dims = re.findall(r"\[\s*(\d*)\s*\]", m.group(3))
  count = 1
  for d in dims:
    if d == "": count = None; break
    count *= int(d)
  return words, m.group(2), count, (m.group(4), init)


def _variable(stmt: str, line: int, space: str) -> Variable:
  r = _decl_tokens(stmt)
  if r is None: raise PTXError(f"cannot read the {space} declaration", line, stmt)
  words, name, count, (_, init) = r
  align, vtype = 0, None
  i = 0
  while i < len(words):
    w = words[i]
    if w == ".align": align = int(words[i + 1]); i += 2; continue
    if w.startswith(".") and w[1:] in DTYPES: vtype = w[1:]
    elif w.startswith(".v") and w[2:].isdigit(): count = None if count is None else count * int(w[2:])
    i += 1
  if vtype is None: raise PTXError(f"{space} variable {name} has no type", line, stmt)
  esize = TYPE_BYTES[vtype]
  size = 0 if count is None else count * esize
  limit = MAX_VARIABLE_BYTES.get(space, 64 << 20)
  if size > limit:      # the hardware's limits, checked before any memory is set aside for it
    raise PTXError(f"a .{space} variable of {size} bytes (at most {limit})", line, stmt)
  data = None
  if init is not None:
    vals = [_init_number(x) for x in re.findall(r"[^{},\s]+", init)]
    dt = DTYPES[vtype]
    arr = np.zeros(max(count or len(vals), len(vals)), dt)
    if vals:                 # whole arrays at once (an initializer may hold millions of values)
      if np.issubdtype(dt, np.floating): arr[:len(vals)] = np.array(vals, np.float64)
      else:
        mask = (1 << (8 * esize)) - 1
        arr.view(np.dtype(f"u{esize}"))[:len(vals)] = np.array([int(v) & mask for v in vals], np.uint64)
    data = arr.tobytes()
    if count is None: size = len(data)
  return Variable(name, space, size, align or esize, data)


def _params(plist: str, line: int, text: str) -> tuple[list[Param], int]:
  params, off = [], 0
  for p in _split_commas(plist):
    words = p.replace(".ptr", " .ptr").split()
    align, ptype, name, count = 0, None, None, 1
    i = 0
    while i < len(words):
      w = words[i]
      if w == ".align": align = int(words[i + 1]); i += 2; continue
      if w.startswith(".") and w[1:] in DTYPES and ptype is None: ptype = w[1:]
      elif not w.startswith("."): name = w
      i += 1
    if ptype is None or name is None: raise PTXError(f"cannot read parameter {p!r}", line, text)
    m = re.fullmatch(r"([\w$]+)\[(\d+)\]", name)
    if m: name, count = m.group(1), int(m.group(2))
    esize = TYPE_BYTES[ptype]
    align = align or esize
    off = (off + align - 1) // align * align
    params.append(Param(name, ptype, esize * count, align, off))
    off += esize * count
  return params, off


def parse(text) -> PTXModule:
  if isinstance(text, (bytes, bytearray, memoryview)):
    blob = bytes(text)
    if blob[:4] == b"\x7fELF": raise PTXError("the mock NV GPU runs PTX only; it cannot execute SASS cubins")
    try: text = blob.decode()
    except UnicodeDecodeError: raise PTXError("the code object is neither PTX text nor a cubin") from None
  if text[:4] == "\x7fELF": raise PTXError("the mock NV GPU runs PTX only; it cannot execute SASS cubins")
  if len(text) > MAX_TEXT: raise PTXError(f"a PTX text of {len(text)} characters (the mock reads at most {MAX_TEXT})")
  text = _strip_comments(text)
  mod = PTXModule("", "", 64, {}, {}, {})
  stmts = list(_statements(text))
  digest = hashlib.sha1(text.encode(errors="surrogatepass")).digest()
  try:
    _module(mod, stmts)
    for k in mod.kernels.values(): k.source_key = (digest, k.name)   # executor.compile_kernel's cache key
    return mod
  except PTXError: raise
  except (ValueError, IndexError, KeyError, OverflowError, RecursionError) as e:   # a malformed statement, named
    raise PTXError(f"malformed PTX ({type(e).__name__}: {e})") from None


def _module(mod: PTXModule, stmts: list) -> PTXModule:
  i = 0
  while i < len(stmts):
    line, s = stmts[i]
    head = s.split()[0] if s.split() else ""
    if head == ".version": mod.version = s.split()[1]
    elif head == ".target": mod.target = s.split(None, 1)[1].strip()
    elif head == ".address_size": mod.address_size = int(s.split()[1])
    elif ".entry" in s.split() or ".func" in s.split():
      i = _kernel(mod, stmts, i)
      continue
    elif ".shared" in s.split():   # a module-level shared variable (extern: the dynamic shared memory)
      v = _variable(s.replace(".visible", "").replace(".extern", "").replace(".weak", ""), line, "shared")
      mod.shared[v.name] = v
    elif head in (".global", ".const") or (head in (".visible", ".extern", ".weak") and
                                           (".global" in s.split() or ".const" in s.split())):
      space = "const" if ".const" in s.split() else "global"
      v = _variable(s.replace(".visible", "").replace(".extern", "").replace(".weak", ""), line, space)
      mod.globals[v.name] = v
    elif head in _IGNORED or head == "": pass
    else: raise PTXError("unsupported module-level statement", line, s)
    i += 1
  return mod


def _kernel(mod: PTXModule, stmts, i: int) -> int:
  line, s = stmts[i]
  m = re.search(r"\.(entry|func)\s+(?:\([^)]*\)\s*)?([\w$]+)\s*(?:\((.*?)\))?(.*)$", s, re.S)
  if not m: raise PTXError("cannot read the .entry header", line, s)
  kind, name, plist, tail = m.group(1), m.group(2), m.group(3) or "", m.group(4)
  if i + 1 >= len(stmts) or stmts[i + 1][1] != "{":
    if kind == "func" or ".extern" in s: return i + 1     # a declaration only
    raise PTXError(f"kernel {name} has no body", line, s)
  params, pbytes = _params(plist, line, s)
  k = PTXKernel(name, params, pbytes, {}, dict(mod.globals), [], {}, 0, 0, None, module=mod)
  for d, attr in ((".maxntid", "maxntid"), (".reqntid", "reqntid")):
    dm = re.search(re.escape(d) + r"\s+([\d\s,]+)", tail)
    if dm: setattr(k, attr, tuple(int(x) for x in dm.group(1).split(",") if x.strip()))
  depth = 0
  i += 1
  shared_off = local_off = 0
  for v in mod.shared.values():   # module-level .shared variables: each kernel gets its own copy
    v = Variable(v.name, v.space, v.size, v.align)
    if v.size == 0:
      k.dynamic_shared_name, v.offset = v.name, -1
    else:
      shared_off = (shared_off + v.align - 1) // v.align * v.align
      v.offset, shared_off = shared_off, shared_off + v.size
    k.variables[v.name] = v
  while i < len(stmts):
    line, s = stmts[i]
    i += 1
    if s == "{": depth += 1; continue
    if s == "}":
      depth -= 1
      if depth == 0: break
      continue
    while True:
      lm = _LABEL.match(s)
      if not lm: break
      k.labels[lm.group(1)] = len(k.instrs)
      s = s[lm.end():].strip()
    if not s: continue
    words = s.split()
    head = words[0]
    if head == ".reg":
      _regs(k, s, line)
    elif head in (".shared", ".local") or (head == ".extern" and ".shared" in words):
      space = "shared" if ".shared" in words else "local"
      v = _variable(s.replace(".extern", ""), line, space)
      if space == "shared" and v.size == 0:
        k.dynamic_shared_name = v.name
        v.offset = -1
      elif space == "shared":
        shared_off = (shared_off + v.align - 1) // v.align * v.align
        v.offset, shared_off = shared_off, shared_off + v.size
      else:
        local_off = (local_off + v.align - 1) // v.align * v.align
        v.offset, local_off = local_off, local_off + v.size
      k.variables[v.name] = v
    elif head in (".global", ".const"):
      v = _variable(s, line, "const" if head == ".const" else "global")
      mod.globals[v.name] = v
      k.variables[v.name] = v
    elif head in _IGNORED or head.startswith(".param"):
      if head.startswith(".param"): raise PTXError("call-site .param declarations (function calls) are not supported", line, s)
    elif head.startswith("."): raise PTXError("unsupported directive in a kernel body", line, s)
    else: k.instrs.append(_instruction(s, line))
  k.static_shared_bytes = shared_off
  k.local_bytes_per_thread = local_off
  if kind == "entry": mod.kernels[name] = k
  return i


def _regs(k: PTXKernel, s: str, line: int) -> None:
  rtype = None
  rest = s.split(None, 1)[1]
  m = re.match(r"((?:\.\w+\s+)+)(.*)$", rest, re.S)
  if not m: raise PTXError("cannot read the .reg declaration", line, s)
  for w in m.group(1).split():
    if w[1:] in DTYPES: rtype = w[1:]
    elif w.startswith(".v"): raise PTXError("vector registers are not supported", line, s)
  if rtype is None: raise PTXError("register declaration without a type", line, s)
  for item in _split_commas(m.group(2)):
    rm = re.fullmatch(r"(%?[\w$]+)\s*(?:<(\d+)>)?", item.strip())
    if not rm: raise PTXError(f"cannot read register {item!r}", line, s)
    if rm.group(2) is None: k.registers[rm.group(1)] = rtype
    else:
      if int(rm.group(2)) > MAX_REGS or len(k.registers) + int(rm.group(2)) > MAX_REGS:
        raise PTXError(f"more than {MAX_REGS} registers in a kernel", line, s)
      for n in range(int(rm.group(2))): k.registers[f"{rm.group(1)}{n}"] = rtype
