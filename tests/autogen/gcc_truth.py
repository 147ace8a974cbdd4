"""Ground truth for generated bindings, from gcc.

libclang only *lists* what a header declares (records and their field paths, enum constants); the object-like
macros are listed by a regular expression over the header text. gcc computes every number: a generated C
program prints sizeof/alignof of every record, offsetof/sizeof of every field, the bit position and width of
every bitfield (found by setting it to all ones in a zeroed record), and the value of every macro and enum
constant with C11 _Generic choosing a signed or unsigned print by its C type. Every listed macro gets a verdict
from gcc, by compile-and-retry through three forms: an integer constant (the _Generic print); else string
literals only (`static const char s[] = "" MACRO;` compiles for exactly those: its bytes are printed); else no
value (include guards and other empty macros, types, attributes, names C does not know), with its expansion as
the preprocessor spells it (`#__VA_ARGS__`), where the module must hold no value either.
"""
from __future__ import annotations

import ctypes
import dataclasses
import os
import re
import subprocess

import clang.cindex as ci


@dataclasses.dataclass
class Target:
  name: str             # module name ("kfd")
  headers: list[str]    # absolute paths
  include_dirs: list[str]
  defines: dict
  prelude: str


def _record_pyname(decl, typedef_name=None):
  kind = "union" if decl.kind == ci.CursorKind.UNION_DECL else "struct"
  if not _unnamed(decl): return f"{kind}_{decl.spelling}", f"{kind} {decl.spelling}"
  if typedef_name: return f"{kind}_{typedef_name}", typedef_name
  return None, None


def _unnamed(decl) -> bool:
  sp = decl.spelling   # libclang 18 spells `typedef struct {..} X` by the typedef name X: look for the tag
  if not sp or "(unnamed" in sp or "(anonymous" in sp: return True
  toks = [t.spelling for t in decl.get_tokens()]
  return "{" in toks and sp not in toks[:toks.index("{")]


def list_declarations(t: Target, resource_dir: str):
  """(records, enum constant names): records = [(pyname, C type, [(path, is_bitfield)])] in the headers."""
  args = ["-x", "c", "-std=gnu11", "-resource-dir", resource_dir]
  for d in t.include_dirs: args += ["-I", d]
  for k, v in t.defines.items(): args.append(f"-D{k}={v}")
  text = t.prelude + "\n" + "".join(f'#include "{h}"\n' for h in t.headers)
  tu = ci.Index.create().parse("truth_list.c", args=args, unsaved_files=[("truth_list.c", text)])
  errors = [str(d) for d in tu.diagnostics if d.severity >= ci.Diagnostic.Error]
  assert not errors, errors[:5]
  own = {os.path.abspath(h) for h in t.headers}
  records, enums, seen = [], [], set()

  def fields_of(rtype, prefix, out):
    for f in rtype.get_fields():
      ft = f.type.get_canonical()
      base, suffix = ft, ""
      while base.kind == ci.TypeKind.CONSTANTARRAY:
        base = base.element_type.get_canonical(); suffix += "[0]"
      if not f.spelling or "(anonymous" in f.spelling:   # a C11 anonymous member: its fields belong to the parent
        fields_of(base, prefix, out)
        continue
      path = prefix + f.spelling
      out.append((path, "bit" if f.is_bitfield() else "flex" if ft.kind == ci.TypeKind.INCOMPLETEARRAY else ""))
      if base.kind == ci.TypeKind.RECORD and _unnamed(base.get_declaration()):
        fields_of(base, path + suffix + ".", out)

  def visit(cur):
    for c in cur.get_children():
      in_own = c.location.file and os.path.abspath(c.location.file.name) in own
      if c.kind in (ci.CursorKind.STRUCT_DECL, ci.CursorKind.UNION_DECL):
        if c.is_definition() and in_own:
          py, cn = _record_pyname(c)
          if py and py not in seen:
            seen.add(py); out = []; fields_of(c.type, "", out); records.append((py, cn, out))
          visit(c)
      elif c.kind == ci.CursorKind.TYPEDEF_DECL and in_own:
        d = c.underlying_typedef_type.get_canonical().get_declaration()
        if d.kind in (ci.CursorKind.STRUCT_DECL, ci.CursorKind.UNION_DECL) and _unnamed(d) and d.is_definition():
          py, cn = _record_pyname(d, c.spelling)
          if py not in seen:
            seen.add(py); out = []; fields_of(d.type, "", out); records.append((py, cn, out))
      elif c.kind == ci.CursorKind.ENUM_DECL and in_own:
        enums.extend(e.spelling for e in c.get_children() if e.kind == ci.CursorKind.ENUM_CONSTANT_DECL)
  visit(tu.cursor)
  return records, enums


_DEFINE = re.compile(r"^\s*#\s*define\s+([A-Za-z_]\w*)(\(?)", re.M)


def list_macros(headers: list[str]) -> list[str]:
  out = []
  for h in headers:
    for m in _DEFINE.finditer(open(h).read()):
      if not m.group(2) and m.group(1) not in out: out.append(m.group(1))
  return out


C_HEAD = r'''
#include <stdio.h>
#include <stddef.h>
#include <string.h>
static void pr_s(const char *n, long long v) { printf("M %s %lld\n", n, v); }
static void pr_u(const char *n, unsigned long long v) { printf("M %s %llu\n", n, v); }
#define PV(n, x) _Generic((x), _Bool: pr_u, char: pr_s, signed char: pr_s, unsigned char: pr_u, short: pr_s, \
  unsigned short: pr_u, int: pr_s, unsigned int: pr_u, long: pr_s, unsigned long: pr_u, long long: pr_s, \
  unsigned long long: pr_u)(n, x)
static void pr_hex(const char *kind, const char *n, const char *p, size_t len) {
  printf("%s %s ", kind, n);
  for (size_t i = 0; i < len; i++) printf("%02x", (unsigned char)p[i]);
  printf("\n");
}
#define HCQ_SPELL_(...) #__VA_ARGS__
#define HCQ_SPELL(...) HCQ_SPELL_(__VA_ARGS__)
static void bitpos(const char *rec, const char *path, const unsigned char *p, size_t n) {
  int first = -1, count = 0;
  for (size_t i = 0; i < n * 8; i++) if (p[i / 8] >> (i % 8) & 1) { if (first < 0) first = (int)i; count++; }
  printf("B %s %s %d %d\n", rec, path, first, count);
}
'''

# how the truth program asks gcc for a macro, by stage: an integer, string literals only, the spelled expansion
MACRO_FORMS = [
  lambda n: f'PV("{n}", ({n}));',
  # (an empty macro would make `""`: the array of negative size rejects a macro that spells as nothing)
  lambda n: f'{{ static const char s[] = "" {n}; (void)sizeof(char[sizeof(HCQ_SPELL({n})) > 1 ? 1 : -1]); '
            f'pr_hex("T", "{n}", s, sizeof s - 1); }}',
  # a `hi:lo` bit range (NVIDIA's DRF fields): C reads hi as (1 ? NAME) and lo as (0 ? NAME)
  lambda n: f'printf("R %s %lld %lld\\n", "{n}", (long long)(1 ? {n}), (long long)(0 ? {n}));',
  lambda n: f'{{ static const char s[] = HCQ_SPELL({n}); pr_hex("X", "{n}", s, sizeof s - 1); }}',
]


def c_program(t: Target, records, enums, macros: dict[str, int]) -> tuple[str, dict[int, str]]:
  """The C text and, for every line that prints a macro, the macro's name. macros: name -> stage (MACRO_FORMS
  index; past the last one the macro is left out)."""
  lines = [C_HEAD, t.prelude] + [f'#include "{h}"' for h in t.headers]
  lines.append("int main(void) {")
  macro_lines = {}
  for py, cn, fields in records:
    lines.append(f'printf("S {py} %zu %zu\\n", sizeof({cn}), _Alignof({cn}));')
    for path, kind in fields:
      if kind == "flex":   # a flexible array member has no size: the binding's is 0
        lines.append(f'printf("F {py} {path} %zu 0\\n", offsetof({cn}, {path}));')
      elif kind == "bit":
        lines.append(f'{{ {cn} v; memset(&v, 0, sizeof v); v.{path} = -1; '
                     f'bitpos("{py}", "{path}", (const unsigned char *)&v, sizeof v); }}')
      else:
        lines.append(f'printf("F {py} {path} %zu %zu\\n", offsetof({cn}, {path}), sizeof((({cn} *)0)->{path}));')
  text_before = "\n".join(lines).count("\n") + 1
  for name in list(enums) + [m for m in macros if m not in enums]:
    stage = 0 if name in enums else macros[name]
    if stage >= len(MACRO_FORMS): continue
    macro_lines[text_before + 1 + len(macro_lines)] = name
    lines.append(MACRO_FORMS[stage](name))
  lines.append("return 0; }")
  return "\n".join(lines) + "\n", macro_lines


def gcc_truth(t: Target, resource_dir: str, workdir: str):
  """Compile and run the truth program: ({(kind, rec, path): values}, {macro: "int" | "string" | "none"}, records).
  Kinds: S sizeof/alignof, F offset/size, B bit position/width, M integer value, T string bytes, R a hi:lo bit
  range (hi, lo), X no value (the
  expansion as gcc's preprocessor spells it, "" for an empty macro, None when even that does not compile)."""
  records, enums = list_declarations(t, resource_dir)
  stage = {m: 0 for m in list_macros(t.headers)}
  flags = ["-std=gnu11", "-w", "-fmax-errors=0"] + [f"-I{d}" for d in t.include_dirs] + \
          [f"-D{k}={v}" for k, v in t.defines.items()]
  src, exe = os.path.join(workdir, f"{t.name}_truth.c"), os.path.join(workdir, f"{t.name}_truth")
  for _ in range(12):
    text, macro_lines = c_program(t, records, enums, stage)
    with open(src, "w") as f: f.write(text)
    r = subprocess.run(["gcc", *flags, src, "-o", exe], capture_output=True, text=True)
    if r.returncode == 0: break
    bad = {int(m.group(1)) for m in re.finditer(re.escape(src) + r":(\d+):", r.stderr)}
    names = {macro_lines[b] for b in bad if b in macro_lines}
    # an error gcc places in the header (a macro that expands to a name the headers never define, in the string form
    # `"" NAME`) comes with a note naming the macro the truth program used, not with a line of the program
    names |= {m.group(1) for m in re.finditer(r"note: in definition of macro [‘'`](\w+)[’']", r.stderr)
              if m.group(1) in macro_lines.values()}
    assert names, "the truth program failed outside macro lines:\n" + r.stderr[:3000]
    assert not names & set(enums), f"enum constants did not compile: {names & set(enums)}"
    for n in names: stage[n] += 1
  else:
    raise AssertionError("truth program did not compile after 12 rounds")
  out = subprocess.run([exe], capture_output=True, text=True, check=True).stdout
  truth = {("X", m, ""): None for m, s in stage.items() if s >= len(MACRO_FORMS)}
  for line in out.splitlines():
    p = line.split()
    if p[0] == "S": truth[("S", p[1], "")] = (int(p[2]), int(p[3]))
    elif p[0] == "F": truth[("F", p[1], p[2])] = (int(p[3]), int(p[4]))
    elif p[0] == "B": truth[("B", p[1], p[2])] = (int(p[3]), int(p[4]))
    elif p[0] == "M": truth[("M", p[1], "")] = int(p[2])
    elif p[0] == "T": truth[("T", p[1], "")] = bytes.fromhex(p[2] if len(p) > 2 else "")
    elif p[0] == "R": truth[("R", p[1], "")] = (int(p[2]), int(p[3]))
    elif p[0] == "X": truth[("X", p[1], "")] = bytes.fromhex(p[2] if len(p) > 2 else "").decode("latin-1")
  verdicts = {m: ("int", "string", "range", "none", "none")[s] for m, s in stage.items()}
  return truth, verdicts, records


# ---------------------------------------------------------------- the python side
def _ftype(cls, name):
  if name in getattr(cls, "_bitfields_", ()): return ctypes.c_int   # a runtime.BitField: its width is in .size
  for f in cls._fields_:
    if f[0] == name: return f[1]
  for anon in getattr(cls, "_anonymous_", ()):
    sub = _ftype(dict((f[0], f[1]) for f in cls._fields_)[anon], name)
    if sub is not None: return sub
  return None


def resolve(cls, path):
  """(byte offset, size, bit position, bit width) of a field path like 'a.b[0].c' in a ctypes record."""
  off, t, desc = 0, cls, None
  for part in path.split("."):
    name, depth = part.split("[")[0], part.count("[0]")
    desc = getattr(t, name)
    off += desc.offset
    t = _ftype(t, name)
    if t is None: raise AttributeError(path)
    for _ in range(depth): t = t._type_
  bits = desc.size >> 16
  if bits: return off, None, off * 8 + (desc.size & 0xffff), bits
  return off, ctypes.sizeof(t), None, None


def compare(module, truth) -> tuple[int, list[str], list[str]]:
  """(checked, mismatches, missing) of the module against gcc's values."""
  checked, bad, missing = 0, [], []
  for (kind, rec, path), val in sorted(truth.items()):
    checked += 1
    if kind == "M":
      name = rec
      if not hasattr(module, name): missing.append(f"macro/enum {name}"); continue
      got = getattr(module, name)
      if hasattr(got, "request"): got = got.request
      if got != val: bad.append(f"{name}: python {got!r} gcc {val}")
      continue
    if kind == "T":   # python holds the bytes as str when they are UTF-8, else as bytes
      if not hasattr(module, rec): missing.append(f"string macro {rec}"); continue
      got = getattr(module, rec)
      as_bytes = got.encode() if isinstance(got, str) else got
      if not isinstance(got, (str, bytes)) or as_bytes != val or isinstance(got, bytes) == _utf8(val):
        bad.append(f"{rec}: python {got!r} gcc {val!r}")
      continue
    if kind == "R":   # a hi:lo range: no value of its own, (hi, lo) in the module's RANGES
      got = getattr(module, "RANGES", {}).get(rec)
      if got is None: missing.append(f"range macro {rec}"); continue
      if got != val or isinstance(getattr(module, rec, None), (int, str, bytes)):
        bad.append(f"{rec}: python range {got} (attribute {getattr(module, rec, None)!r}), gcc {val}")
      continue
    if kind == "X":   # gcc finds no value: python must not make one up
      got = getattr(module, rec, None)
      if isinstance(got, (int, str, bytes)) or hasattr(got, "request"):
        bad.append(f"{rec}: python {got!r}, gcc has no value (expands to {val!r})")
      continue
    cls = getattr(module, rec, None)
    if cls is None and rec.startswith(("struct_", "union_")):
      # a typedef of a typedef'd record (`typedef A_PARAMS B_PARAMS;`): the module holds it as the alias B_PARAMS
      cls = getattr(module, rec.split("_", 1)[1], None)
    if cls is None: missing.append(f"record {rec}"); continue
    if kind == "S":
      got = (ctypes.sizeof(cls), ctypes.alignment(cls))
      if got != val: bad.append(f"{rec}: sizeof/alignof python {got} gcc {val}")
      continue
    try: off, size, bitpos, bits = resolve(cls, path)
    except AttributeError: missing.append(f"field {rec}.{path}"); continue
    if kind == "F" and (off, size) != val: bad.append(f"{rec}.{path}: offset/size python {(off, size)} gcc {val}")
    if kind == "B" and (bitpos, bits) != val: bad.append(f"{rec}.{path}: bit pos/width python {(bitpos, bits)} gcc {val}")
  return checked, bad, missing


def _utf8(b: bytes) -> bool:
  try: b.decode("utf-8")
  except UnicodeDecodeError: return False
  return True


def bitfield_bytes(t: Target, module, records, workdir: str) -> tuple[int, list[str]]:
  """Every bitfield set to 5 (and to -1) in a record whose bytes are all 0xa5: (cases, differences between the
  bytes gcc leaves and the bytes ctypes/runtime.BitField leave)."""
  cases = [(py, cn, path, v) for py, cn, fields in records for path, kind in fields if kind == "bit" for v in (5, -1)]
  body = []
  for i, (py, cn, path, v) in enumerate(cases):
    body.append(f'{{ {cn} x; memset(&x, 0xa5, sizeof x); x.{path} = {v}; printf("%d ", {i});'
                f' for (size_t k = 0; k < sizeof x; k++) printf("%02x", ((unsigned char *)&x)[k]); printf("\\n"); }}')
  src = os.path.join(workdir, f"{t.name}_bits.c")
  with open(src, "w") as f:
    f.write("#include <stdio.h>\n#include <string.h>\n" + t.prelude + "\n" + "".join(f'#include "{h}"\n' for h in t.headers) +
            "int main(void) {\n" + "\n".join(body) + "\nreturn 0; }\n")
  exe = src[:-2]
  subprocess.run(["gcc", "-std=gnu11", "-w", *[f"-I{d}" for d in t.include_dirs],
                  *[f"-D{k}={v}" for k, v in t.defines.items()], src, "-o", exe], check=True)
  want = dict(line.split() for line in subprocess.run([exe], capture_output=True, text=True, check=True).stdout.splitlines())
  bad = []
  for i, (py, cn, path, v) in enumerate(cases):
    cls = getattr(module, py)
    obj = cls.from_buffer_copy(b"\xa5" * ctypes.sizeof(cls))
    target, parts = obj, path.split(".")
    for p in parts[:-1]: target = getattr(target, p)
    setattr(target, parts[-1], v)
    if bytes(obj).hex() != want[str(i)]: bad.append(f"{py}.{path} = {v}: python {bytes(obj).hex()} gcc {want[str(i)]}")
  return len(cases), bad
