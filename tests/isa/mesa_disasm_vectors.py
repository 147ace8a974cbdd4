"""Mesa's ir3 disassembler test vectors (src/freedreno/ir3/tests/disasm.c of the pinned Mesa source package,
autogen/manifest.json "mesa": Debian trixie's mesa 25.0.7-2+deb13u1), read off the C source and kept as a fixture
(tests/fixtures/ir3/mesa_25.0.7_disasm_vectors.json) so that the tests need no Mesa tree.

What disasm.c's test program does with them (its main()): every vector is decoded with
`.gpu_id = dev_info->chip * 100` (420 -> 400, 540 -> 500, 630 -> 600, chip id 0x07030001 -> 700), `.show_errors =
true` and `.no_match_cb = print_raw` (ir3_shader.c print_raw: "raw 0x%X%X" of the low then the high 32 bits), and the
text must equal the expected string (trailing newlines trimmed); then the expected string is assembled, which must give
the same word unless the vector says `.parse_fail=true`.

How the C is read:
- comments are removed first (a vector in a comment is no vector), then of every `#if 0 ... #else ... #endif` the
  #else part is kept, as the C preprocessor does;
- INSTR_4XX/5XX/6XX/7XX(HI_LO, "text"[, .parse_fail=true]) and the *_RAW forms (a number instead of HI_LO);
- add_generated_tests(): its loop over `offset` (bounds as written) of ralloc_asprintf(format, offset) texts with
  INSTR_6XX_RAW(BASE + ((uint64_t)offset << SHIFT)) words.

    python -m tests.isa.mesa_disasm_vectors PATH/TO/disasm.c     # (re)writes the fixture from that file
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import sys

FIXTURE = os.path.join(os.path.dirname(__file__), "..", "fixtures", "ir3", "mesa_25.0.7_disasm_vectors.json")
SOURCE = "mesa 25.0.7-2+deb13u1 (Debian trixie source package): src/freedreno/ir3/tests/disasm.c"


class VectorError(Exception):
  pass


def _strip_comments(src: str) -> str:
  out, i, n = [], 0, len(src)
  while i < n:
    c = src[i]
    if c == '"':                                   # a string: copied as is (it may hold anything)
      j = i + 1
      while j < n and src[j] != '"': j += 2 if src[j] == "\\" else 1
      out.append(src[i:j + 1])
      i = j + 1
    elif src.startswith("/*", i):
      j = src.index("*/", i + 2)
      out.append(" " if "\n" not in src[i:j] else "\n" * src[i:j].count("\n"))
      i = j + 2
    elif src.startswith("//", i):
      j = src.find("\n", i)
      i = n if j < 0 else j
    else:
      out.append(c)
      i += 1
  return "".join(out)


def _preprocess(src: str) -> str:
  """#if 0 / #else / #endif: the #else part (nested conditionals are not used by the file and are refused)."""
  out, state = [], []          # state: per open #if, whether its current branch is kept
  for line in src.splitlines():
    s = line.strip()
    if s.startswith("#if"):
      if s not in ("#if 0", "#if 1"): raise VectorError(f"unexpected conditional {s!r}")
      if state: raise VectorError("nested conditionals")
      state.append(s == "#if 1")
    elif s.startswith("#else"): state[-1] = not state[-1]
    elif s.startswith("#endif"): state.pop()
    elif not state or state[-1]: out.append(line)
  return "\n".join(out)


def _macros(src: str) -> dict:
  """INSTR_xXX[_RAW] -> {"gpu_id": N} or {"chip_id": N}, from the #defines."""
  out = {}
  for name, body in re.findall(r"#define (INSTR_\dXX(?:_RAW)?)\(i, d, \.\.\.\) \{(.*)\}", src):
    m = re.search(r"\.gpu_id = (\d+)", body) or re.search(r"\.chip_id = (0x[0-9a-fA-F]+)", body)
    if not m: raise VectorError(f"{name}: neither .gpu_id nor .chip_id")
    out[name] = {"gpu_id" if "gpu_id" in m.group(0) else "chip_id": int(m.group(1), 0)}
  if not out: raise VectorError("no INSTR_ macros")
  return out


def isa_gpu_id(target: dict) -> int:
  """The gpu id the decoder is given: dev_info->chip * 100 (the generation; chip ids are 0xGGxxxxxx)."""
  if "gpu_id" in target: return target["gpu_id"] // 100 * 100
  return (target["chip_id"] >> 24) * 100


def _unescape(text: str) -> str:
  return text.encode().decode("unicode_escape")


def parse(src: str) -> list[dict]:
  macros = _macros(src)
  body = _preprocess(_strip_comments(src))
  vectors = []
  table = body[body.index("tests[] = {"):body.index("add_generated_tests")]
  for m in re.finditer(r'\b(INSTR_\dXX)(_RAW)?\(\s*(?:([0-9a-fA-F]{8})_([0-9a-fA-F]{8})|(0x[0-9a-fA-F]+)(?:ull)?)\s*,'
                       r'\s*"((?:[^"\\]|\\.)*)"\s*(,\s*\.parse_fail\s*=\s*true)?\s*\)', table):
    name, raw, hi, lo, num, text, pf = m.groups()
    target = macros[name + (raw or "")]
    word = int(hi + lo, 16) if hi else int(num, 16)
    vectors.append({**target, "word": f"{word:016x}", "text": _unescape(text), "parse_fail": bool(pf)})
  if len(re.findall(r"\bINSTR_\dXX", table)) != len(vectors):
    raise VectorError(f"read {len(vectors)} of {len(re.findall(r'INSTR_', table))} vectors of the table")
  gen = body[body.index("add_generated_tests"):body.index("trim(char")]
  loop = re.search(r"for \(int (\w+) = (\d+); \1 < (0x[0-9a-fA-F]+|\d+); \1\+\+\)", gen)
  if not loop: raise VectorError("add_generated_tests: no loop found")
  var, first, end = loop.group(1), int(loop.group(2), 0), int(loop.group(3), 0)
  texts = dict((n, f) for n, f in re.findall(r'char \*(\w+) = ralloc_asprintf\(\s*ctx,\s*"((?:[^"\\]|\\.)*)",\s*'
                                             + var + r'\);', gen))
  calls = [(texts.get(t), m, b, s) for m, b, s, t in re.findall(
    r'\(struct test\)(INSTR_\dXX_RAW)\(\s*(0x[0-9a-fA-F]+)ull \+ \(\(uint64_t\)' + var + r' << (\d+)\),\s*(\w+)\);', gen)]
  if len(texts) != gen.count("ralloc_asprintf") or len(calls) != gen.count("u_vector_add") or None in [c[0] for c in calls]:
    raise VectorError("add_generated_tests: a call not understood")
  for value in range(first, end):
    for fmt, macro, base, shift in calls:
      if fmt.count("%") != 1 or "%u" not in fmt: raise VectorError(f"format {fmt!r}")
      word = (int(base, 16) + (value << int(shift))) & ((1 << 64) - 1)
      vectors.append({**macros[macro], "word": f"{word:016x}", "text": _unescape(fmt).replace("%u", str(value)),
                      "parse_fail": False, "generated": True})
  return vectors


def load_fixture(path: str = FIXTURE) -> dict:
  with open(path) as f: return json.load(f)


def fixture_data(path: str) -> dict:
  src = open(path, encoding="utf-8").read()
  return {"source": SOURCE, "sha256": hashlib.sha256(src.encode()).hexdigest(),
          "decode_options": "gpu_id = chip * 100, show_errors, no_match_cb = print_raw (see tests/isa/mesa_disasm_vectors.py)",
          "vectors": parse(src)}


if __name__ == "__main__":
  data = fixture_data(sys.argv[1])
  os.makedirs(os.path.dirname(FIXTURE), exist_ok=True)
  with open(FIXTURE, "w") as f:
    f.write(json.dumps({k: v for k, v in data.items() if k != "vectors"}, indent=1)[:-2] + ',\n "vectors": [\n')
    f.write(",\n".join("  " + json.dumps(v) for v in data["vectors"]) + "\n ]\n}\n")
  print(f"{len(data['vectors'])} vectors -> {os.path.normpath(FIXTURE)}")
