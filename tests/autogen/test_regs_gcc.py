"""Register modules agree with gcc: every #define of the offset and sh_mask headers whose register name matches the
manifest's filter is in the module with the value gcc computes (and nothing else is)."""
from __future__ import annotations

import re
import subprocess

import pytest

from hcq.autogen import generator
from hcq.config import from_env

MANIFEST = generator.load_manifest()
REG_MODULES = [n for n, s in MANIFEST["modules"].items() if s["kind"] == "regs"]
_DEFINE = re.compile(r"^\s*#\s*define\s+([A-Za-z_]\w*)[ \t]+\S", re.M)


def register_of(name: str) -> str:
  if name.startswith("reg"): return name[3:-len("_BASE_IDX")] if name.endswith("_BASE_IDX") else name[3:]
  return name.split("__", 1)[0]


@pytest.mark.tools("gcc")
@pytest.mark.parametrize("name", REG_MODULES)
def test_register_module_agrees_with_gcc(name, tmp_path):
  import importlib
  spec = MANIFEST["modules"][name]
  roots = generator.Roots(MANIFEST, from_env().autogen_cache, lambda *a: None)
  headers = [roots.path(spec["offset"]), roots.path(spec["sh_mask"])]
  keep = re.compile(spec["filter"])
  names = []
  for h, is_offset in zip(headers, (True, False)):
    for m in _DEFINE.finditer(open(h).read()):
      n = m.group(1)
      if is_offset and not n.startswith("reg"): continue
      if keep.match(register_of(n)): names.append(n)
  assert len(names) > 50
  # a table of (name, value as unsigned long long, bits, signed): data, not code, so that gcc compiles it quickly
  lines = ["#include <stdio.h>"] + [f'#include "{h}"' for h in headers]
  lines.append("#define E(n, x) { n, (unsigned long long)(x), sizeof(x) * 8, _Generic((x), int: 1, long: 1, default: 0) }")
  lines.append("static const struct { const char *n; unsigned long long v; int bits, sgn; } T[] = {")
  lines += [f'E("{n}", {n}),' for n in names]
  lines += ["};", "int main(void) { for (size_t i = 0; i < sizeof T / sizeof T[0]; i++) "
            'printf("%s %llu %d %d\\n", T[i].n, T[i].v, T[i].bits, T[i].sgn); return 0; }']
  (tmp_path / "r.c").write_text("\n".join(lines) + "\n")
  subprocess.run(["gcc", "-std=gnu11", "-w", str(tmp_path / "r.c"), "-o", str(tmp_path / "r")], check=True)
  out = []
  for line in subprocess.run([str(tmp_path / "r")], capture_output=True, text=True, check=True).stdout.splitlines():
    n, v, bits, sgn = line.split()
    v, bits = int(v) & ((1 << int(bits)) - 1), int(bits)
    if sgn == "1" and v >> (bits - 1): v -= 1 << bits
    out.append((n, v))
  mod = importlib.import_module(f"hcq.autogen.{name}")
  bad = [f"{n}: python {getattr(mod, n, None)} gcc {v}" for n, v in out if getattr(mod, n, None) != v]
  known = set(names)
  extra = [k for k, v in vars(mod).items() if type(v) is int and k not in known]
  print(f"{name}: {len(out)} checked, {len(bad)} mismatched or missing, {len(extra)} not in the headers' filtered set")
  assert len(out) == len(names)
  assert not bad and not extra, (bad + extra)[:20]
