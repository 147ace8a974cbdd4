"""The rnndb register modules (autogen/rnndb.py, from Mesa's Adreno XML) against something we did not write: the C
header Mesa's own src/freedreno/registers/gen_header.py writes from the same XML file, read by gcc.

For every module: the set of names equals the header's (every REG_ register, every __MASK/__SHIFT field, every
one-bit flag and every enum value the header defines), and gcc's value of each equals ours (array registers at two
indices). Mesa's script and XML come from the pinned Mesa source package (autogen/manifest.json "mesa").
"""
from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys

import pytest

from hcq.config import from_env

generator = importlib.import_module("hcq.autogen.generator")

# (Mesa 25.0.7 has no a7xx.xml: its a7xx registers are the A7XX variants of a6xx.xml, REG_A7XX_* in qcom.a6xx)
MODULES = {"qcom.a6xx": "adreno/a6xx.xml", "qcom.adreno_pm4": "adreno/adreno_pm4.xml",
           "qcom.adreno_common": "adreno/adreno_common.xml"}
# what the header's inline functions call without defining (Mesa's util headers): stand-ins with C's meaning
PRELUDE = """#include <stdint.h>
#include <stdbool.h>
#include <assert.h>
#include <stdio.h>
static inline uint32_t fui(float f) { union { float f; uint32_t u; } x = { f }; return x.u; }
static inline uint16_t _mesa_float_to_half(float f) { _Float16 h = (_Float16)f; uint16_t u; __builtin_memcpy(&u, &h, 2); return u; }
"""

# a value to hand each kind of field's X(val): a fraction for float/fixed ones, a negative for int ones
SAMPLE = {"float": 1.5, "fixed": -2.75, "ufixed": 2.5, "int": -3}


@pytest.fixture(scope="module")
def registers_dir():
  manifest = generator.load_manifest()
  roots = generator.Roots(manifest, from_env().autogen_cache, lambda *a: None)
  try: return roots.path("mesa:src/freedreno/registers")
  except Exception as e: pytest.skip(f"the Mesa source package is not available here: {e}")


def header_of(registers_dir: str, xml: str, tmp_path) -> str:
  # Mesa 25's command line (src/freedreno/registers/adreno/meson.build: gen_header.py --rnn DIR --xml FILE c-defines); it opens the file as given
  r = subprocess.run([sys.executable, os.path.join(registers_dir, "gen_header.py"), "--rnn", registers_dir, "--xml", xml,
                      "c-defines"], capture_output=True, text=True, timeout=120, cwd=registers_dir)
  assert r.returncode == 0, r.stderr
  path = tmp_path / (os.path.basename(xml) + ".h")
  path.write_text(r.stdout)
  return str(path)


def names_in_header(text: str) -> set[str]:
  """Every register, field, flag and enum value name the header defines (read off its text)."""
  names = set(re.findall(r"^#define (REG_\w+)", text, re.M))
  # (Mesa 25 marks the registers that have several variants deprecated: "static inline __attribute__((deprecated)) ")
  names |= set(re.findall(r"^static inline\s*(?:__attribute__\(\(deprecated\)\))?\s*uint32_t (REG_\w+)\(uint32_t i0\) \{", text, re.M))
  names |= {n + "__MASK" for n in re.findall(r"^#define (\w+)__MASK\b", text, re.M)}
  names |= {n + "__SHIFT" for n in re.findall(r"^#define (\w+)__SHIFT\b", text, re.M)}
  names |= {n for n in re.findall(r"^#define (\w+)\s+0x[0-9a-f]+\s*$", text, re.M)
            if not n.startswith("REG_") and not n.endswith(("__MASK", "__SHIFT"))}
  names |= set(re.findall(r"^\t(\w+) = -?(?:0x[0-9a-f]+|\d+),$", text, re.M))
  return names


def our_items(mod) -> dict[str, int]:
  """name (C spelling, with (i) for array registers) -> the value the module gives."""
  out = {}
  for name, r in mod.REGISTERS.items():
    if r.stride: out[f"{name}(1)"], out[f"{name}(3)"] = r(1), r(3)
    else: out[name] = r.offset
  for name, f in mod.FIELDS.items():
    if f.flag: out[name] = f.mask
    else: out[name + "__MASK"], out[name + "__SHIFT"] = f.mask, f.low
  for values in mod.ENUMS.values():
    for name, v in values.items(): out[name] = v
  return out


@pytest.mark.tools("gcc")
@pytest.mark.parametrize("modname", MODULES)
def test_every_item_equals_gccs_reading_of_mesas_header(modname, registers_dir, tmp_path):
  mod = importlib.import_module(f"hcq.autogen.{modname}")
  header = header_of(registers_dir, MODULES[modname], tmp_path)
  text = open(header).read()
  ours = our_items(mod)
  plain = {k.split("(")[0] for k in ours}
  expected = names_in_header(text)
  assert plain == expected, (f"{modname}: names only in ours: {sorted(plain - expected)[:10]}; "
                             f"only in Mesa's header: {sorted(expected - plain)[:10]}")
  # the enum types a header refers to come from the headers of the files its XML imports (Mesa includes those first)
  xml_text = open(os.path.join(registers_dir, MODULES[modname])).read()
  imports = [header_of(registers_dir, f, tmp_path) for f in re.findall(r'<import file="([^"]+)"', xml_text)]
  includes = "".join(f'#include "{h}"\n' for h in imports + [header])
  src = tmp_path / "probe.c"
  body = "\n".join(f'  printf("%s %lld\\n", "{k}", (long long)({k}));' for k in ours)
  src.write_text(f'{PRELUDE}{includes}int main(void) {{\n{body}\n  return 0;\n}}\n')
  exe = tmp_path / "probe"
  r = subprocess.run(["gcc", "-w", "-o", str(exe), str(src)], capture_output=True, text=True, timeout=300)
  assert r.returncode == 0, r.stderr[-3000:]
  out = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60).stdout
  gcc = {line.rsplit(" ", 1)[0]: int(line.rsplit(" ", 1)[1]) for line in out.splitlines()}
  assert len(gcc) == len(ours)
  # enum constants are ints in C: compare 32-bit patterns
  bad = [(k, ours[k], gcc[k]) for k in ours if (ours[k] - gcc[k]) % (1 << 32) != 0]
  assert not bad, f"{modname}: {len(bad)} values differ from gcc's, e.g. {bad[:5]}"
  print(f"{modname}: {len(ours)} values equal gcc's reading of Mesa's header")


@pytest.mark.tools("gcc")
@pytest.mark.parametrize("modname", MODULES)
def test_every_field_encoder_equals_the_headers_function(modname, registers_dir, tmp_path):
  """X(val) of every (non-flag) field equals the C header's inline X(val) on a sample of the field's kind: the f32 or
  f16 bits of a float, a fixed/ufixed value times 2^radix, a negative int masked, a number shifted by shr."""
  mod = importlib.import_module(f"hcq.autogen.{modname}")
  xml_text = open(os.path.join(registers_dir, MODULES[modname])).read()
  headers = [header_of(registers_dir, f, tmp_path) for f in re.findall(r'<import file="([^"]+)"', xml_text)]
  headers.append(header_of(registers_dir, MODULES[modname], tmp_path))
  samples = {}
  for name, f in mod.FIELDS.items():
    if f.flag: continue
    v = SAMPLE.get(f.kind, 1 << f.shr)
    if f.kind == "ufixed" and f.high - f.low + 1 <= f.radix + 1: v = 0.5
    samples[name] = v
  if not samples: pytest.skip(f"{modname} has only one-bit flags (no encoder to compare)")
  body = "\n".join(f'  printf("%s %llu\\n", "{n}", (unsigned long long)({n}({v!r})));' for n, v in samples.items())
  src = tmp_path / "enc.c"
  src.write_text(PRELUDE + "".join(f'#include "{h}"\n' for h in headers) + f"int main(void) {{\n{body}\n  return 0;\n}}\n")
  exe = tmp_path / "enc"
  r = subprocess.run(["gcc", "-w", "-o", str(exe), str(src)], capture_output=True, text=True, timeout=300)
  assert r.returncode == 0, r.stderr[-3000:]
  out = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60).stdout
  gcc = {line.rsplit(" ", 1)[0]: int(line.rsplit(" ", 1)[1]) & 0xFFFFFFFF for line in out.splitlines()}
  bad = [(n, v, hex(mod.FIELDS[n].encode(v)), hex(gcc[n])) for n, v in samples.items()
         if mod.FIELDS[n].encode(v) != gcc[n]]
  assert not bad, f"{modname}: {len(bad)} of {len(samples)} encoders differ from the header's, e.g. {bad[:5]}"


def test_the_cp_opcodes_the_driver_needs_are_there():
  """The type-7 opcodes and type-4 registers a compute submission uses (the values the test above holds to gcc)."""
  from hcq.autogen.qcom import a6xx, adreno_pm4
  ops = adreno_pm4.ENUMS["adreno_pm4_type3_packets"]
  for name in ("CP_LOAD_STATE6_FRAG", "CP_EXEC_CS", "CP_EVENT_WRITE", "CP_MEM_WRITE", "CP_WAIT_REG_MEM",
               "CP_REG_TO_MEM", "CP_WAIT_FOR_IDLE", "CP_SET_MARKER"):
    assert name in ops
  assert a6xx.REG_A6XX_SP_CS_CONFIG == a6xx.REGISTERS["REG_A6XX_SP_CS_CONFIG"].offset
  f = a6xx.FIELDS["A6XX_SP_CS_CONFIG_NTEX"]
  assert f.decode(f.encode(5)) == 5 and a6xx.A6XX_SP_CS_CONFIG_NTEX(5) == 5 << f.low
  with pytest.raises(ValueError): f.encode(1 << 20)
