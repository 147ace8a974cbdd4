"""Function-like macros translated to python (PACKET3, SDMA field macros, ...) give what gcc computes.

For every translated function of the checked modules, gcc evaluates the macro on a few unsigned int arguments
and prints the result with its C type (C11 _Generic); the python function's result, taken in that C type,
must be equal."""
from __future__ import annotations

import importlib
import inspect
import itertools
import subprocess

import pytest

from hcq.autogen import generator
from hcq.config import from_env

MODULES = ["amd.pm4", "amd.pm4_soc15", "amd.sdma", "pci", "drm"]
ARGS = [0, 1, 3, 0x5a, 0xff, 0x1234]

C_HEAD = r'''
#include <stdio.h>
static void pr_s(int i, long long v) { printf("%d %lld s%d\n", i, v, 0); }
static void pr_u(int i, unsigned long long v) { printf("%d %llu u%d\n", i, v, 0); }
static void pr_s32(int i, long long v) { printf("%d %lld s32\n", i, v); }
static void pr_u32(int i, unsigned long long v) { printf("%d %llu u32\n", i, v); }
#define PV(i, x) _Generic((x), int: pr_s32, unsigned int: pr_u32, long: pr_s, unsigned long: pr_u, \
  long long: pr_s, unsigned long long: pr_u)(i, x)
'''


def as_c(value: int, kind: str) -> int:
  bits = 32 if kind.endswith("32") else 64
  value &= (1 << bits) - 1
  if kind.startswith("s") and value >> (bits - 1): value -= 1 << bits
  return value


@pytest.mark.tools("gcc")
@pytest.mark.parametrize("name", MODULES)
def test_translated_function_macros_agree_with_gcc(name, tmp_path):
  manifest = generator.load_manifest()
  spec = manifest["modules"][name]
  roots = generator.Roots(manifest, from_env().autogen_cache, lambda *a: None)
  headers = [roots.path(h) for h in spec["headers"]]
  incs = [roots.path(i) for i in spec.get("include", [])]
  mod = importlib.import_module(f"hcq.autogen.{name}")
  funcs = [(n, f) for n, f in vars(mod).items() if inspect.isfunction(f) and f.__module__ == mod.__name__]
  assert funcs, f"{name} has no translated macros"
  cases = []
  for n, f in funcs:
    nargs = len(inspect.signature(f).parameters)
    for args in itertools.islice(itertools.product(ARGS, repeat=nargs), 0, None, max(1, len(ARGS) ** nargs // 8)):
      cases.append((n, f, args))
  lines = [C_HEAD, spec.get("prelude", "")] + [f'#include "{h}"' for h in headers] + ["int main(void) {"]
  for i, (n, f, args) in enumerate(cases):
    lines.append(f"PV({i}, {n}({', '.join(f'{a}u' for a in args)}));")
  lines.append("return 0; }")
  src = tmp_path / "m.c"
  src.write_text("\n".join(lines) + "\n")
  flags = ["-std=gnu11", "-w", *[f"-I{d}" for d in incs], *[f"-D{k}={v}" for k, v in spec.get("defines", {}).items()]]
  subprocess.run(["gcc", *flags, str(src), "-o", str(tmp_path / "m")], check=True)
  out = subprocess.run([str(tmp_path / "m")], capture_output=True, text=True, check=True).stdout.split("\n")
  bad = []
  for line in filter(None, out):
    i, v, kind = line.split()
    n, f, args = cases[int(i)]
    got = as_c(f(*args), kind)
    if got != int(v): bad.append(f"{n}{args}: python {got:#x} gcc {int(v):#x}")
  print(f"{name}: {len(cases)} checked, {len(bad)} mismatched ({len(funcs)} functions)")
  assert len(out) - 1 == len(cases)
  assert not bad, "\n".join(bad[:30])
