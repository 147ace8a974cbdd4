"""amd_kd (LLVM's AMDHSAKernelDescriptor.h, a C++ header) agrees with g++: the layout of kernel_descriptor_t and
every enum constant of namespace llvm::amdhsa (listed by libclang, valued by g++)."""
from __future__ import annotations

import ctypes
import subprocess

import clang.cindex as ci
import pytest

from hcq.autogen import amd_kd, generator
from hcq.autogen.clangparse import resource_dir
from hcq.config import from_env


@pytest.mark.tools("g++")
def test_kernel_descriptor_agrees_with_gxx(tmp_path):
  manifest = generator.load_manifest()
  roots = generator.Roots(manifest, from_env().autogen_cache, lambda *a: None)
  header = roots.path(manifest["modules"]["amd_kd"]["headers"][0])
  tu = ci.Index.create().parse(header, args=["-x", "c++", "-std=c++17", "-resource-dir", resource_dir()])
  fields, enums = [], []

  def visit(c, ns):
    for ch in c.get_children():
      if ch.kind == ci.CursorKind.NAMESPACE: visit(ch, ns + [ch.spelling])
      elif ch.kind == ci.CursorKind.STRUCT_DECL and ch.spelling == "kernel_descriptor_t" and ch.is_definition():
        fields.extend(f.spelling for f in ch.type.get_fields())
      elif ch.kind == ci.CursorKind.ENUM_DECL and ns == ["llvm", "amdhsa"]:
        enums.extend(e.spelling for e in ch.get_children() if e.kind == ci.CursorKind.ENUM_CONSTANT_DECL)
  visit(tu.cursor, [])
  assert len(fields) >= 10 and len(enums) > 100
  lines = ["#include <cstdio>", "#include <cstddef>", "#include <type_traits>", f'#include "{header}"',
           "using namespace llvm::amdhsa;", "template <class T> void pv(const char *n, T v) {",
           '  if (std::is_signed<typename std::underlying_type<T>::type>::value) printf("M %s %lld\\n", n, (long long)v);',
           '  else printf("M %s %llu\\n", n, (unsigned long long)v); }', "int main() {",
           'printf("S %zu %zu\\n", sizeof(kernel_descriptor_t), alignof(kernel_descriptor_t));']
  lines += [f'printf("F {f} %zu %zu\\n", offsetof(kernel_descriptor_t, {f}), sizeof(kernel_descriptor_t::{f}));' for f in fields]
  lines += [f'pv("{e}", {e});' for e in enums]
  lines.append("}")
  (tmp_path / "kd.cpp").write_text("\n".join(lines) + "\n")
  subprocess.run(["g++", "-std=c++17", "-w", str(tmp_path / "kd.cpp"), "-o", str(tmp_path / "kd")], check=True)
  out = subprocess.run([str(tmp_path / "kd")], capture_output=True, text=True, check=True).stdout.splitlines()
  kd = amd_kd.struct_kernel_descriptor_t
  bad, checked = [], 0
  for line in out:
    p = line.split()
    checked += 1
    if p[0] == "S":
      if (ctypes.sizeof(kd), ctypes.alignment(kd)) != (int(p[1]), int(p[2])): bad.append(line)
    elif p[0] == "F":
      d = getattr(kd, p[1], None)
      if d is None or (d.offset, d.size) != (int(p[2]), int(p[3])): bad.append(f"{line}: python {d}")
    else:
      if getattr(amd_kd, p[1], None) != int(p[2]): bad.append(f"{line}: python {getattr(amd_kd, p[1], None)}")
  print(f"amd_kd: {checked} checked, {len(bad)} mismatched")
  assert checked == 1 + len(fields) + len(enums)
  assert not bad, "\n".join(bad[:30])
