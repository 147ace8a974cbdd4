"""Mesa 25's own ir3 decoder, built from the pinned Mesa source package, as an oracle for hcq's disassembler.

Mesa's build generates ir3-isa.c from the isaspec XML with src/compiler/isaspec/decode.py (its meson.build:
`decode.py --xml ir3.xml --out-c ir3-isa.c --out-h ir3-isa.h`; the script needs mako) and links it with
isaspec.c and Mesa's util library. Here the same C is compiled with gcc, with a main that decodes 64-bit words from
stdin as src/freedreno/ir3/tests/disasm.c does (`.gpu_id`, `.show_errors = true`, `.no_match_cb = print_raw`,
print_raw as ir3_shader.c has it). Two functions ralloc.c and half_float.c link against are given stand-ins the
decoder never reaches (u_printf_length: vsnprintf's count; the round-toward-zero float->half conversion).

The words: for every instruction (leaf bitset) of each generation, random words with its pattern bits set as the
description says (its other bits random), plus plain random words (mostly no instruction).

    python -m tests.isa.mesa_ir3_oracle      # (re)writes tests/fixtures/ir3/mesa_25.0.7_decoder_oracle.json
The fixture keeps Mesa's text for each word, so that the test needs neither mako nor gcc nor the Mesa package.
"""
from __future__ import annotations

import importlib
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile

FIXTURE = os.path.join(os.path.dirname(__file__), "..", "fixtures", "ir3", "mesa_25.0.7_decoder_oracle.json")
GENS = (400, 500, 600, 700)
SEED, PER_LEAF, PLAIN = 2026, 3, 16

MAIN_C = r"""
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include "ir3-isa.h"
/* freedreno/ir3/ir3_shader.c print_raw */
static void print_raw(FILE *out, const BITSET_WORD *data, size_t size) { fprintf(out, "raw 0x%X%X\n", data[0], data[1]); }
int main(int argc, char **argv) {
  unsigned gpu_id = atoi(argv[1]);
  uint32_t code[2];
  while (fread(code, 8, 1, stdin) == 1) {
    ir3_isa_disasm(code, 8, stdout, &(struct isa_decode_options){ .gpu_id = gpu_id, .show_errors = true,
                                                                  .no_match_cb = print_raw });
    fflush(stdout);
  }
  return 0;
}
"""
STUBS_C = r"""
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
size_t u_printf_length(const char *fmt, va_list args) { va_list a; va_copy(a, args); int n = vsnprintf(NULL, 0, fmt, a); va_end(a); return n; }
uint16_t _mesa_float_to_half_rtz_slow(float x) { return 0; }
"""
# what Mesa's meson configuration defines for a little-endian glibc build
DEFINES = ["-DUTIL_ARCH_LITTLE_ENDIAN=1", "-DUTIL_ARCH_BIG_ENDIAN=0", "-DHAVE_SECURE_GETENV", "-DHAVE_STRUCT_TIMESPEC",
           "-DHAVE_TIMESPEC_GET", "-DHAVE_PTHREAD", "-D_GNU_SOURCE"]


class OracleError(Exception):
  pass


def mesa_root() -> str:
  generator = importlib.import_module("hcq.autogen.generator")
  from hcq.config import from_env
  return generator.Roots(generator.load_manifest(), from_env().autogen_cache, lambda *a: None).root("mesa")


def build(root: str, out_dir: str, python: str = sys.executable) -> str:
  """The path of the decoder program, built in out_dir from the Mesa tree at root."""
  def run(argv, what):
    try: r = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    except FileNotFoundError: raise OracleError(f"{what}: {argv[0]} is not installed") from None
    if r.returncode: raise OracleError(f"{what} failed: {r.stderr[-2000:]}")
  run([python, os.path.join(root, "src/compiler/isaspec/decode.py"), "--xml", os.path.join(root, "src/freedreno/isa/ir3.xml"),
       "--out-c", os.path.join(out_dir, "ir3-isa.c"), "--out-h", os.path.join(out_dir, "ir3-isa.h")], "isaspec decode.py")
  for name, text in (("main.c", MAIN_C), ("stubs.c", STUBS_C)):
    with open(os.path.join(out_dir, name), "w") as f: f.write(text)
  exe = os.path.join(out_dir, "ir3dis")
  incs = [f"-I{out_dir}"] + [f"-I{os.path.join(root, d)}" for d in ("include", "src", "src/compiler/isaspec",
                                                                     "src/freedreno/isa", "src/util")]
  srcs = [os.path.join(out_dir, n) for n in ("main.c", "stubs.c", "ir3-isa.c")] + \
         [os.path.join(root, p) for p in ("src/compiler/isaspec/isaspec.c", "src/util/ralloc.c", "src/util/hash_table.c",
                                          "src/util/half_float.c")]
  run(["gcc", "-O1", "-w", *DEFINES, *incs, *srcs, "-lm", "-o", exe], "gcc")
  return exe


def words_for(gen: int, rng: random.Random, per_leaf: int = PER_LEAF, plain: int = PLAIN) -> list[int]:
  from hcq.compiler.isa.ir3.isa import ISA
  isa, out = ISA(gen), []
  for b in sorted(isa.leaves["#instruction"], key=lambda b: (b.name, b.match)):
    if not b.gen[0] <= gen <= b.gen[1]: continue
    for _ in range(per_leaf): out.append((rng.getrandbits(64) & ~(b.mask & ~b.dontcare)) | b.match)
  return out + [rng.getrandbits(64) for _ in range(plain)]


def mesa_texts(exe: str, gen: int, words: list[int]) -> list[str]:
  data = b"".join(struct.pack("<Q", w) for w in words)
  r = subprocess.run([exe, str(gen)], input=data, capture_output=True, timeout=600)
  lines = r.stdout.decode("utf-8", "replace").split("\n")
  if lines and lines[-1] == "": lines.pop()
  if r.returncode or len(lines) != len(words):
    raise OracleError(f"Mesa's decoder gave {len(lines)} lines for {len(words)} words (rc {r.returncode})")
  return lines


def oracle(seed: int = SEED, per_leaf: int = PER_LEAF, plain: int = PLAIN, python: str = sys.executable) -> dict:
  root = mesa_root()
  tmp = tempfile.mkdtemp(prefix="hcq-ir3-oracle-")
  try:
    exe = build(root, tmp, python)
    rng = random.Random(seed)
    gens = {}
    for gen in GENS:
      words = words_for(gen, rng, per_leaf, plain)
      gens[str(gen)] = [[f"{w:016x}", t] for w, t in zip(words, mesa_texts(exe, gen, words))]
    return {"source": "Mesa 25.0.7 (Debian trixie mesa 25.0.7-2+deb13u1): src/freedreno/isa/ir3*.xml through "
                      "src/compiler/isaspec/decode.py and isaspec_decode_impl.c, built by tests/isa/mesa_ir3_oracle.py",
            "seed": seed, "per_leaf": per_leaf, "plain": plain, "gens": gens}
  finally:
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
  data = oracle(python=sys.argv[1] if len(sys.argv) > 1 else sys.executable)
  with open(FIXTURE, "w") as f:
    f.write(json.dumps({k: v for k, v in data.items() if k != "gens"}, indent=1)[:-2] + ',\n "gens": {\n')
    f.write(",\n".join(f'  "{g}": [\n' + ",\n".join("   " + json.dumps(p) for p in pairs) + "\n  ]"
                       for g, pairs in data["gens"].items()) + "\n }\n}\n")
  print(f"{sum(len(v) for v in data['gens'].values())} words -> {os.path.normpath(FIXTURE)}")
