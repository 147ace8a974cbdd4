"""Read C (or C++) headers with libclang into a plain description: records with their exact layout, enum
constants, integer and string macros evaluated by clang, ioctl macros with their parts, and simple function-like
macros.

Everything here is a build step (run by `python -m hcq.autogen`); generated modules never import it.
"""
from __future__ import annotations

import ctypes
import dataclasses
import os
import re

import clang.cindex as ci

# the PyPI libclang wheel has no resource headers (stddef.h, stdint.h, ...): take clang's, else gcc's (freestanding)
RESOURCE_DIRS = ["/usr/lib/llvm-19/lib/clang/19", "/usr/lib/llvm-18/lib/clang/18", "/usr/lib/gcc/x86_64-linux-gnu/12"]


class HeaderError(Exception):
  """A header did not parse; the message names file:line of each error."""


# ---------------------------------------------------------------- libclang calls cindex 18 does not wrap
_lib_ready = False


def _lib():
  global _lib_ready
  lib = ci.conf.lib
  if not _lib_ready:
    lib.clang_Cursor_Evaluate.argtypes = [ci.Cursor]
    lib.clang_Cursor_Evaluate.restype = ctypes.c_void_p
    lib.clang_EvalResult_getKind.argtypes = [ctypes.c_void_p]
    lib.clang_EvalResult_getKind.restype = ctypes.c_int
    lib.clang_EvalResult_isUnsignedInt.argtypes = [ctypes.c_void_p]
    lib.clang_EvalResult_isUnsignedInt.restype = ctypes.c_uint
    lib.clang_EvalResult_getAsUnsigned.argtypes = [ctypes.c_void_p]
    lib.clang_EvalResult_getAsUnsigned.restype = ctypes.c_ulonglong
    lib.clang_EvalResult_getAsLongLong.argtypes = [ctypes.c_void_p]
    lib.clang_EvalResult_getAsLongLong.restype = ctypes.c_longlong
    lib.clang_EvalResult_dispose.argtypes = [ctypes.c_void_p]
    lib.clang_EvalResult_dispose.restype = None
    lib.clang_Cursor_isMacroFunctionLike.argtypes = [ci.Cursor]
    lib.clang_Cursor_isMacroFunctionLike.restype = ctypes.c_uint
    lib.clang_Cursor_isAnonymousRecordDecl.argtypes = [ci.Cursor]
    lib.clang_Cursor_isAnonymousRecordDecl.restype = ctypes.c_uint
    _lib_ready = True
  return lib


CXEval_Int = 1


def eval_int(cursor) -> int | None:
  """The integer value clang computes for a variable's initializer (None when it is no integer constant)."""
  lib = _lib()
  res = lib.clang_Cursor_Evaluate(cursor)
  if not res: return None
  try:
    if lib.clang_EvalResult_getKind(res) != CXEval_Int: return None
    if lib.clang_EvalResult_isUnsignedInt(res): return lib.clang_EvalResult_getAsUnsigned(res)
    return lib.clang_EvalResult_getAsLongLong(res)
  finally:
    lib.clang_EvalResult_dispose(res)


# ---------------------------------------------------------------- the description
@dataclasses.dataclass
class Field:
  name: str            # "" for an anonymous member
  ctype: str           # python expression of the ctypes type
  offset_bits: int
  size: int            # bytes of the declared type
  bits: int | None = None   # bitfield width


@dataclasses.dataclass
class Record:
  kind: str            # "struct" | "union"
  pyname: str          # struct_X / union_X
  cname: str           # "struct X" as C spells it, or "" when unnamed
  size: int
  align: int
  pack: int
  fields: list[Field]
  file: str
  line: int
  deps: set[str] = dataclasses.field(default_factory=set)
  explicit: bool = False   # bitfields laid out by the generator (ctypes' own placement differs from C's)
  align_to: int = 0    # alignment above the fields' own (aligned attribute): a zero-length member raises it


@dataclasses.dataclass
class Constant:
  name: str
  value: int
  ctype: str           # C type spelling ("int", "unsigned long", ...)
  origin: str          # "macro" | "enum"
  file: str
  line: int


@dataclasses.dataclass
class StringConstant:
  name: str
  value: bytes         # the bytes of the char array C makes of the literal, without its final NUL
  file: str
  line: int


@dataclasses.dataclass
class IoctlDef:
  name: str
  dir: int
  type: int
  nr: int
  struct: str | None   # python name of the argument type, None for _IO
  size: int
  request: int
  file: str
  line: int


@dataclasses.dataclass
class MacroFunction:
  name: str
  params: list[str]
  expr: str            # python expression
  file: str
  line: int


@dataclasses.dataclass
class HeaderInfo:
  records: dict[str, Record]
  constants: dict[str, Constant]
  ioctls: dict[str, IoctlDef]
  functions: dict[str, MacroFunction]
  typedefs: dict[str, str]
  skipped_macros: list[str]
  strings: dict[str, StringConstant] = dataclasses.field(default_factory=dict)
  # object-like macros spelling a `hi:lo` bit range (NVIDIA's DRF fields: NVC56F_SEM_EXECUTE_OPERATION is 2:0):
  # name -> (hi, lo), as C gives them in `(1 ? NAME)` and `(0 ? NAME)`
  ranges: dict[str, tuple[int, int]] = dataclasses.field(default_factory=dict)


INT_KINDS = {
  ci.TypeKind.BOOL: ("c_bool", False), ci.TypeKind.CHAR_S: ("c_char", True), ci.TypeKind.SCHAR: ("c_int8", True),
  ci.TypeKind.CHAR_U: ("c_uint8", False), ci.TypeKind.UCHAR: ("c_uint8", False),
  ci.TypeKind.SHORT: ("c_int16", True), ci.TypeKind.USHORT: ("c_uint16", False),
  ci.TypeKind.INT: ("c_int32", True), ci.TypeKind.UINT: ("c_uint32", False),
  ci.TypeKind.LONG: ("c_int64", True), ci.TypeKind.ULONG: ("c_uint64", False),
  ci.TypeKind.LONGLONG: ("c_int64", True), ci.TypeKind.ULONGLONG: ("c_uint64", False),
  ci.TypeKind.INT128: ("c_int64 * 2", True), ci.TypeKind.UINT128: ("c_uint64 * 2", False),
  ci.TypeKind.CHAR16: ("c_uint16", False), ci.TypeKind.CHAR32: ("c_uint32", False), ci.TypeKind.WCHAR: ("c_int32", True),
}
FLOAT_KINDS = {ci.TypeKind.FLOAT: "c_float", ci.TypeKind.DOUBLE: "c_double", ci.TypeKind.LONGDOUBLE: "c_longdouble"}
INT_TYPE_NAMES = {
  ci.TypeKind.BOOL: "_Bool", ci.TypeKind.CHAR_S: "char", ci.TypeKind.SCHAR: "signed char", ci.TypeKind.CHAR_U: "char",
  ci.TypeKind.UCHAR: "unsigned char", ci.TypeKind.SHORT: "short", ci.TypeKind.USHORT: "unsigned short",
  ci.TypeKind.INT: "int", ci.TypeKind.UINT: "unsigned int", ci.TypeKind.LONG: "long", ci.TypeKind.ULONG: "unsigned long",
  ci.TypeKind.LONGLONG: "long long", ci.TypeKind.ULONGLONG: "unsigned long long",
}
SIGNED_KINDS = {ci.TypeKind.CHAR_S, ci.TypeKind.SCHAR, ci.TypeKind.SHORT, ci.TypeKind.INT, ci.TypeKind.LONG,
                ci.TypeKind.LONGLONG, ci.TypeKind.INT128, ci.TypeKind.WCHAR}


def resource_dir() -> str:
  for d in RESOURCE_DIRS:
    if os.path.isdir(os.path.join(d, "include")): return d
  raise HeaderError("no clang resource directory found (install clang-19): tried " + ", ".join(RESOURCE_DIRS))


def unnamed_record(c) -> bool:
  """True for `struct { ... }` (libclang 18 spells a typedef'd one by the typedef's name, and is_anonymous()
  says no for it): the record's name must appear among its tokens before '{'."""
  sp = c.spelling
  if not sp or "(unnamed" in sp or "(anonymous" in sp or c.is_anonymous(): return True
  toks = [t.spelling for t in c.get_tokens()]
  if "{" in toks: return sp.split("::")[-1] not in toks[:toks.index("{")]
  return False


def normalize(value: int, t) -> int:
  """The value as C holds it in type t (its width and signedness)."""
  kind = t.kind
  if kind == ci.TypeKind.ENUM: t = t.get_declaration().enum_type.get_canonical(); kind = t.kind
  bits = t.get_size() * 8
  if kind == ci.TypeKind.BOOL: return 1 if value else 0
  value &= (1 << bits) - 1
  if kind in SIGNED_KINDS and value >> (bits - 1): value -= 1 << bits
  return value


# ---------------------------------------------------------------- parsing
class Parser:
  def __init__(self, headers: list[str], include_dirs: list[str], prelude: str = "", lang: str = "c",
               defines: dict[str, str] | None = None, extra_args: list[str] | None = None):
    self.headers = [os.path.abspath(h) for h in headers]
    self.include_dirs = include_dirs
    self.prelude = prelude
    self.lang = lang
    self.defines = defines or {}
    self.extra_args = extra_args or []
    self.exclude_records: set[str] = set()
    self.index = ci.Index.create()
    self.main_name = "hcq_autogen_main.cpp" if lang == "c++" else "hcq_autogen_main.c"

  def args(self) -> list[str]:
    a = ["-x", self.lang, "-std=gnu++17" if self.lang == "c++" else "-std=gnu11", "-target", "x86_64-linux-gnu",
         "-resource-dir", resource_dir(), "-ffreestanding", "-ferror-limit=0", "-Wno-everything"]
    for d in self.include_dirs: a += ["-I", d]
    for k, v in self.defines.items(): a.append(f"-D{k}={v}")
    return a + self.extra_args

  def main_text(self) -> str:
    return self.prelude + "\n" + "".join(f'#include "{h}"\n' for h in self.headers)

  def parse(self, text: str, detailed: bool):
    opts = ci.TranslationUnit.PARSE_DETAILED_PROCESSING_RECORD if detailed else 0
    opts |= ci.TranslationUnit.PARSE_SKIP_FUNCTION_BODIES
    return self.index.parse(self.main_name, args=self.args(), unsaved_files=[(self.main_name, text)], options=opts)

  def check(self, tu, main_lines: int | None = None) -> list[tuple[int, str]]:
    """Raise HeaderError on errors in the headers; return (line, message) of errors in the main file past
    main_lines (the probe lines added to evaluate macros)."""
    probe_errors, real = [], []
    for d in tu.diagnostics:
      if d.severity < ci.Diagnostic.Error: continue
      f = d.location.file.name if d.location.file else "<unknown>"
      if f == self.main_name and main_lines is not None and d.location.line > main_lines:
        probe_errors.append((d.location.line, d.spelling))
      else:
        real.append(f"{f}:{d.location.line}:{d.location.column}: error: {d.spelling}")
    if real: raise HeaderError("\n".join(real[:20]) + (f"\n... {len(real) - 20} more" if len(real) > 20 else ""))
    return probe_errors

  # ---------------------------------------------------------------- main entry
  def run(self, macro_filter=None) -> HeaderInfo:
    base = self.main_text()
    tu = self.parse(base, detailed=True)
    self.check(tu)
    own = set(self.headers)
    self.records: dict[str, Record] = {}
    self.record_by_decl: dict = {}
    self.typedefs: dict[str, str] = {}
    constants: dict[str, Constant] = {}
    macros_all: dict[str, tuple] = {}        # name -> (params or None, tokens) for every macro in the TU
    own_macros = []                          # (name, cursor) defined in our headers, in order
    for c in tu.cursor.get_children():
      if c.kind == ci.CursorKind.MACRO_DEFINITION:
        tokens = list(c.get_tokens())
        toks = [t.spelling for t in tokens]
        if not toks: continue
        # function-like when '(' follows the name with no space (C11 6.10.3); clang_Cursor_isMacroFunctionLike
        # answers for the macro's state at the end of the file and says no for one that was #undef'd since
        fl = len(tokens) > 1 and toks[1] == "(" and tokens[1].extent.start.offset == tokens[0].extent.end.offset
        if fl:
          close = toks.index(")")
          params = [t for t in toks[2:close] if t != ","]
          body = toks[close + 1:]
        else:
          params, body = None, toks[1:]
        macros_all[c.spelling] = (params, body)
        if c.location.file and os.path.abspath(c.location.file.name) in own:
          own_macros.append((c.spelling, c, params, body))
    # records, enums and typedefs (descending into namespaces and records)
    self._own, self._constants = own, constants
    self._walk(tu.cursor, own, constants)
    # macros
    ioctls: dict[str, IoctlDef] = {}
    functions: dict[str, MacroFunction] = {}
    skipped: list[str] = []
    probes = []      # (kind, name, expr)
    strings: dict[str, StringConstant] = {}
    for name, c, params, body in own_macros:
      if macro_filter and not macro_filter(name): continue
      loc = (os.path.abspath(c.location.file.name), c.location.line)
      if params is not None:
        fn = translate_function(name, params, body, macros_all)
        if fn: functions[name] = MacroFunction(name, params, fn, *loc)
        continue
      if not body: continue
      lit = literal_value(body)
      if lit is not None:
        constants[name] = Constant(name, lit[0], lit[1], "macro", *loc)
        continue
      ioc = find_ioctl(body, macros_all)
      if ioc:
        kind, args = ioc
        probes.append(("ioctl", name, (kind, args, loc)))
      probes.append(("macro", name, loc))
    if probes:
      pointers = self._evaluate(base, probes, constants, ioctls, skipped)
      if pointers: self._strings(base, pointers, strings, skipped)
    ranges: dict[str, tuple[int, int]] = {}
    if skipped: self._ranges(base, skipped, ranges)
    # records a kept record or ioctl refers to, wherever they were declared
    keep = {n for n, r in self.records.items() if r.file in own}
    keep |= {i.struct for i in ioctls.values() if i.struct and i.struct in self.records}
    todo = list(keep)
    while todo:
      for d in self.records[todo.pop()].deps:
        if d not in keep: keep.add(d); todo.append(d)
    records = {n: r for n, r in self.records.items() if n in keep and n not in self.exclude_records}
    typedefs = {k: v for k, v in self.typedefs.items() if v in records or not v.startswith(("struct_", "union_"))}
    return HeaderInfo(records, constants, ioctls, functions, typedefs, skipped, strings, ranges)

  # ---------------------------------------------------------------- declarations
  def _walk(self, cursor, own, constants, parent: Record | None = None):
    for c in cursor.get_children():
      k = c.kind
      if k in (ci.CursorKind.NAMESPACE, ci.CursorKind.LINKAGE_SPEC, ci.CursorKind.UNEXPOSED_DECL):
        self._walk(c, own, constants)
      elif k in (ci.CursorKind.STRUCT_DECL, ci.CursorKind.UNION_DECL, ci.CursorKind.CLASS_DECL):
        # an unnamed record at file scope is named by its typedef (visited next), or by the field that holds it
        if c.is_definition() and parent is None and not unnamed_record(c): self.record(c)
      elif k == ci.CursorKind.ENUM_DECL:
        if c.is_definition(): self._enum(c, own, constants)
      elif k == ci.CursorKind.TYPEDEF_DECL:
        self._typedef(c, own, constants)

  def _enum(self, c, own, constants):
    if not c.location.file or os.path.abspath(c.location.file.name) not in own: return
    for e in c.get_children():
      if e.kind == ci.CursorKind.ENUM_CONSTANT_DECL:
        t = e.type.get_canonical()
        if t.kind == ci.TypeKind.ENUM: t = c.enum_type.get_canonical()
        constants[e.spelling] = Constant(e.spelling, normalize(e.enum_value, t), INT_TYPE_NAMES.get(t.kind, "int"),
                                         "enum", os.path.abspath(e.location.file.name), e.location.line)

  def _typedef(self, c, own, constants):
    under = c.underlying_typedef_type
    decl = under.get_canonical().get_declaration()
    if decl.kind in (ci.CursorKind.STRUCT_DECL, ci.CursorKind.UNION_DECL, ci.CursorKind.CLASS_DECL):
      defn = decl.get_definition()
      if defn is not None:
        r = self.record(defn, typedef_name=c.spelling)
        if c.spelling != r.pyname: self.typedefs[c.spelling] = r.pyname
      return
    if decl.kind == ci.CursorKind.ENUM_DECL and decl.is_definition(): self._enum(decl, own, constants)
    if c.location.file and os.path.abspath(c.location.file.name) in own:
      try: self.typedefs[c.spelling] = self.ctype(under, None)
      except HeaderError: pass

  def record(self, c, typedef_name: str | None = None, context: str | None = None) -> Record:
    key = c   # cindex cursors hash with clang_hashCursor and compare with clang_equalCursors
    if key in self.record_by_decl: return self.record_by_decl[key]
    kind = "union" if c.kind == ci.CursorKind.UNION_DECL else "struct"
    named = not unnamed_record(c)
    if named: pyname, cname = f"{kind}_{c.spelling}", f"{kind} {c.spelling}"
    elif typedef_name: pyname, cname = f"{kind}_{typedef_name}", typedef_name
    elif context: pyname, cname = f"{kind}_{context}", ""
    else: pyname, cname = f"{kind}_anon_{c.location.line}", ""
    t = c.type
    rec = Record(kind, pyname, cname, t.get_size(), t.get_align(), 0, [],
                 os.path.abspath(c.location.file.name) if c.location.file else "", c.location.line)
    if rec.size < 0: raise HeaderError(f"{rec.file}:{rec.line}: {pyname} has no complete layout")
    self.record_by_decl[key] = rec
    natural = 1
    for ch in c.get_children():   # enums and records declared inside a record belong to the file scope in C
      if ch.kind == ci.CursorKind.ENUM_DECL and ch.is_definition(): self._enum(ch, self._own, self._constants)
      elif ch.kind in (ci.CursorKind.STRUCT_DECL, ci.CursorKind.UNION_DECL) and ch.is_definition() and \
          not unnamed_record(ch):
        self.record(ch)
    anon_n = 0
    for f in t.get_fields():
      ft = f.type
      fname = f.spelling
      inner = ft.get_canonical()
      while inner.kind in (ci.TypeKind.CONSTANTARRAY, ci.TypeKind.INCOMPLETEARRAY): inner = inner.element_type.get_canonical()
      if inner.kind == ci.TypeKind.RECORD:
        d = inner.get_declaration()
        if not fname or _lib().clang_Cursor_isAnonymousRecordDecl(d): fname = ""
        ctx = f"{pyname.split('_', 1)[1]}_{fname}" if fname else f"{pyname.split('_', 1)[1]}_anon{anon_n}"
        if not fname: anon_n += 1
        self.record(d.get_definition() or d, context=ctx)
      natural = max(natural, ft.get_align())
      bits = f.get_bitfield_width() if f.is_bitfield() else None
      rec.fields.append(Field(fname, self.ctype(ft, rec), f.get_field_offsetof(), max(ft.get_size(), 0), bits))
    # packed (attribute or #pragma pack): ctypes' _pack_ caps every field's alignment the same way
    if rec.align < natural: rec.pack = rec.align
    elif rec.align > natural: rec.align_to = rec.align    # __attribute__((aligned(N))) on the record
    self.records[pyname] = rec
    return rec

  def ctype(self, t, rec: Record | None) -> str:
    t = t.get_canonical()
    k = t.kind
    if k in INT_KINDS: return INT_KINDS[k][0]
    if k in FLOAT_KINDS: return FLOAT_KINDS[k]
    if k == ci.TypeKind.ENUM: return self.ctype(t.get_declaration().enum_type, rec)
    if k in (ci.TypeKind.POINTER, ci.TypeKind.BLOCKPOINTER, ci.TypeKind.MEMBERPOINTER): return "c_void_p"
    if k == ci.TypeKind.CONSTANTARRAY: return f"({self.ctype(t.element_type, rec)}) * {t.element_count}"
    if k == ci.TypeKind.INCOMPLETEARRAY: return f"({self.ctype(t.element_type, rec)}) * 0"
    if k == ci.TypeKind.RECORD:
      d = t.get_declaration()
      r = self.record(d.get_definition() or d)
      if rec is not None: rec.deps.add(r.pyname)
      return r.pyname
    raise HeaderError(f"unsupported type {t.spelling} ({k})")

  # ---------------------------------------------------------------- macro evaluation
  def _evaluate(self, base: str, probes, constants, ioctls, skipped) -> dict[str, tuple]:
    """Evaluate macros with clang: one probe declaration per value, appended to the main file. Returns the
    macros whose value is a pointer (name -> location): string literals are among them."""
    base_lines = base.count("\n") + 1
    lines, what = [], {}
    auto = "auto" if self.lang == "c++" else "__auto_type"
    for i, (kind, name, info) in enumerate(probes):
      if kind == "macro":
        lines.append(f"{auto} __hcq_m{i} = ({name});")
        what[f"__hcq_m{i}"] = ("macro", name, info)
      else:
        ioc_kind, args, loc = info
        if ioc_kind == "_IO":
          lines.append(f"{auto} __hcq_t{i} = ({' '.join(args[0])}); {auto} __hcq_n{i} = ({' '.join(args[1])});")
        else:
          lines.append(f"{auto} __hcq_t{i} = ({' '.join(args[0])}); {auto} __hcq_n{i} = ({' '.join(args[1])}); "
                       f"typedef {' '.join(args[2])} __hcq_s{i};")
        what[f"__hcq_t{i}"] = ("ioc_type", name, info)
        what[f"__hcq_n{i}"] = ("ioc_nr", name, info)
        what[f"__hcq_s{i}"] = ("ioc_struct", name, info)
    text = base + "\n" + "\n".join(lines) + "\n"
    tu = self.parse(text, detailed=False)
    bad_lines = {ln for ln, _ in self.check(tu, base_lines)}
    parts: dict[str, dict] = {}
    pointers: dict[str, tuple] = {}
    for ln in sorted(bad_lines):
      i = ln - base_lines - 1
      if 0 <= i < len(probes) and probes[i][0] == "macro": skipped.append(probes[i][1])
    for c in tu.cursor.get_children():
      if not c.spelling.startswith("__hcq_"): continue
      if c.location.line in bad_lines: continue
      kind, name, info = what[c.spelling]
      if kind == "macro":
        t = c.type.get_canonical()
        if t.kind == ci.TypeKind.POINTER: pointers[name] = info
        if t.kind not in INT_KINDS and t.kind != ci.TypeKind.ENUM: skipped.append(name); continue
        v = eval_int(c)
        if v is None: skipped.append(name); continue
        tk = t if t.kind != ci.TypeKind.ENUM else t.get_declaration().enum_type.get_canonical()
        constants[name] = Constant(name, normalize(v, t), INT_TYPE_NAMES.get(tk.kind, "int"), "macro", *info)
      elif kind in ("ioc_type", "ioc_nr"):
        v = eval_int(c)
        if v is not None: parts.setdefault(name, {})[kind] = v
      else:
        parts.setdefault(name, {})["struct"] = c.underlying_typedef_type
    from ioctl_opt import IOC, IOC_NONE, IOC_READ, IOC_WRITE
    dirs = {"_IO": IOC_NONE, "_IOR": IOC_READ, "_IOW": IOC_WRITE, "_IOWR": IOC_READ | IOC_WRITE}
    for kind, name, info in probes:
      if kind != "ioctl": continue
      ioc_kind, args, loc = info
      p = parts.get(name, {})
      if "ioc_type" not in p or "ioc_nr" not in p or (ioc_kind != "_IO" and "struct" not in p):
        raise HeaderError(f"{loc[0]}:{loc[1]}: cannot evaluate the parts of ioctl {name}")
      struct, size = None, 0
      if ioc_kind != "_IO":
        st = p["struct"]
        struct = self.ctype(st, None)
        size = st.get_canonical().get_size()
      request = IOC(dirs[ioc_kind], p["ioc_type"], p["ioc_nr"], size)
      whole = constants.pop(name, None)
      if whole is None or (whole.value & 0xffffffff) != request:
        raise HeaderError(f"{loc[0]}:{loc[1]}: ioctl {name}: ioctl-opt gives {request:#x}, clang "
                          f"{'nothing' if whole is None else hex(whole.value)}")
      ioctls[name] = IoctlDef(name, dirs[ioc_kind], p["ioc_type"], p["ioc_nr"], struct, size, request, *loc)
    return pointers

  def _strings(self, base: str, candidates: dict[str, tuple], strings, skipped):
    """The macros among candidates that expand to string literals only (one, or adjacent ones concatenated,
    through other macros or not): `static const char s[] = "" MACRO;` compiles for exactly those, and clang
    makes the array's bytes (escapes decoded, literals joined, the final NUL counted in its size)."""
    base_lines = base.count("\n") + 1
    names = list(candidates)
    text = base + "\n" + "".join(f'static const char __hcq_s{i}[] = "" {n};\n' for i, n in enumerate(names))
    tu = self.parse(text, detailed=False)
    bad_lines = {ln for ln, _ in self.check(tu, base_lines)}
    for c in tu.cursor.get_children():
      if not c.spelling.startswith("__hcq_s") or c.location.line in bad_lines: continue
      name = names[int(c.spelling[len("__hcq_s"):])]
      lit = [x for x in c.walk_preorder() if x.kind == ci.CursorKind.STRING_LITERAL]
      loc = candidates[name]
      if len(lit) != 1: raise HeaderError(f"{loc[0]}:{loc[1]}: string macro {name}: no single literal in clang's tree")
      value = unescape(lit[0].spelling)
      if len(value) + 1 != c.type.get_size():
        raise HeaderError(f"{loc[0]}:{loc[1]}: string macro {name}: {len(value)} bytes read from clang's "
                          f"{lit[0].spelling}, its array holds {c.type.get_size()}")
      strings[name] = StringConstant(name, value, *loc)
      skipped.remove(name)


  def _ranges(self, base: str, skipped: list[str], ranges: dict):
    """The macros among the skipped (no integer or string) that spell a `hi:lo` range: C evaluates `(1 ? NAME)` to
    hi and `(0 ? NAME)` to lo for exactly those (NVIDIA's DRF_EXTENT / DRF_BASE read fields so). They stay listed
    as macros without a value."""
    base_lines = base.count("\n") + 1
    names = sorted(set(skipped))
    auto = "auto" if self.lang == "c++" else "__auto_type"
    text = base + "\n" + "".join(f"{auto} __hcq_rh{i} = (1 ? {n}); {auto} __hcq_rl{i} = (0 ? {n});\n"
                                 for i, n in enumerate(names))
    tu = self.parse(text, detailed=False)
    bad_lines = {ln for ln, _ in self.check(tu, base_lines)}
    got: dict[str, dict] = {}
    for c in tu.cursor.get_children():
      if not c.spelling.startswith("__hcq_r") or c.location.line in bad_lines: continue
      if c.type.get_canonical().kind not in INT_KINDS: continue
      v = eval_int(c)
      if v is not None: got.setdefault(names[int(c.spelling[len("__hcq_rh"):])], {})[c.spelling[7]] = v
    for n in names:
      if len(got.get(n, {})) == 2: ranges[n] = (got[n]["h"], got[n]["l"])


_ESCAPES = {"n": 10, "t": 9, "r": 13, "a": 7, "b": 8, "f": 12, "v": 11, "e": 27, "\\": 92, '"': 34, "'": 39, "?": 63}
_ESCAPE_RE = re.compile(r"\\(?:([0-7]{1,3})|x([0-9a-fA-F]+)|(.))", re.S)


def unescape(spelled: str) -> bytes:
  """The bytes of a narrow string literal as clang spells it back (StringLiteral::outputString: printable ASCII
  as is, the usual escapes, every other byte as a 3-digit octal escape)."""
  if spelled.startswith("u8"): spelled = spelled[2:]   # C11 UTF-8 literal: the same char array
  if len(spelled) < 2 or spelled[0] != '"' or spelled[-1] != '"': raise HeaderError(f"not a narrow string literal: {spelled}")
  out, pos, body = bytearray(), 0, spelled[1:-1]
  for m in _ESCAPE_RE.finditer(body):
    out += body[pos:m.start()].encode("latin-1")
    if m.group(1): out.append(int(m.group(1), 8) & 0xff)
    elif m.group(2): out.append(int(m.group(2), 16) & 0xff)
    elif m.group(3) in _ESCAPES: out.append(_ESCAPES[m.group(3)])
    else: raise HeaderError(f"unknown escape \\{m.group(3)} in {spelled}")
    pos = m.end()
  return bytes(out + body[pos:].encode("latin-1"))


# ---------------------------------------------------------------- token helpers
_INT_RE = re.compile(r"^(0[xX][0-9a-fA-F]+|0[bB][01]+|0[0-7]*|[1-9][0-9]*)([uUlL]*)$")


def _literal(tok: str):
  """(value, C type) of an integer literal token, by C11 6.4.4.1; None when it is not one."""
  m = _INT_RE.match(tok)
  if not m: return None
  digits, suffix = m.group(1), m.group(2).lower()
  if suffix not in ("", "u", "l", "ul", "lu", "ll", "ull", "llu"): return None
  if digits[:2].lower() == "0x": v = int(digits, 16)
  elif digits[:2].lower() == "0b": v = int(digits[2:], 2)
  elif digits.startswith("0") and len(digits) > 1: v = int(digits, 8)
  else: v = int(digits)
  decimal = not digits.startswith("0") or digits == "0"
  unsigned = "u" in suffix
  longs = suffix.count("l")
  order = [("int", 32, False), ("unsigned int", 32, True), ("long", 64, False), ("unsigned long", 64, True),
           ("long long", 64, False), ("unsigned long long", 64, True)]
  rank = {0: 0, 1: 2, 2: 4}[longs]
  for name, bits, uns in order[rank:]:
    if unsigned and not uns: continue
    if decimal and not unsigned and uns: continue
    if v < (1 << (bits if uns else bits - 1)): return v, name
  return None


def literal_value(tokens: list[str]):
  """(value, type) when the macro body is one integer literal, possibly parenthesized."""
  while len(tokens) >= 3 and tokens[0] == "(" and tokens[-1] == ")": tokens = tokens[1:-1]
  if len(tokens) == 1: return _literal(tokens[0])
  return None


def _split_args(tokens, start):
  """Arguments of a call whose '(' is tokens[start]: (list of token lists, index after ')')."""
  depth, args, cur = 0, [], []
  i = start
  while i < len(tokens):
    t = tokens[i]
    if t == "(":
      depth += 1
      if depth > 1: cur.append(t)
    elif t == ")":
      depth -= 1
      if depth == 0:
        args.append(cur)
        return args, i + 1
      cur.append(t)
    elif t == "," and depth == 1:
      args.append(cur); cur = []
    else: cur.append(t)
    i += 1
  return None, len(tokens)


IOC_MACROS = ("_IO", "_IOR", "_IOW", "_IOWR")


def find_ioctl(tokens, macros, depth=0):
  """Expand the macro body until an _IO/_IOR/_IOW/_IOWR call appears: (kind, [type, nr, argtype] tokens)."""
  if depth > 20: return None
  i = 0
  while i < len(tokens):
    t = tokens[i]
    nxt = tokens[i + 1] if i + 1 < len(tokens) else None
    if t in IOC_MACROS and nxt == "(":
      args, _ = _split_args(tokens, i + 1)
      if args is None: return None
      return t, args
    if t in macros:
      params, body = macros[t]
      if params is None:
        r = find_ioctl(body, macros, depth + 1)
        if r: return r
      elif nxt == "(":
        args, end = _split_args(tokens, i + 1)
        if args is None or "#" in body or "##" in body: return None
        sub = {p: a for p, a in zip(params, args)}
        expanded = [x for b in body for x in (sub[b] if b in sub else [b])]
        r = find_ioctl(expanded, macros, depth + 1)
        if r: return r
        i = end
        continue
    i += 1
  return None


_PY_OPS = {"<<", ">>", "&", "|", "^", "+", "*", "(", ")"}


def translate_function(name, params, body, macros):
  """A python expression for a function-like macro made only of integers, its parameters, other macros and
  the operators << >> & | ^ + * (same results as C for non-negative values that fit); None otherwise."""
  if not body: return None
  out = []
  for t in body:
    if t in params: out.append(f"({t})")
    elif t in _PY_OPS: out.append(t)
    elif _literal(t) is not None: out.append(str(_literal(t)[0]))
    elif re.match(r"^[A-Za-z_]\w*$", t) and t in macros: out.append(t)
    else: return None
  return " ".join(out)
