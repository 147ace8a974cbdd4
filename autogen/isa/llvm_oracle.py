"""Batch drivers for llvm-mc-19, the reference used by the table generator and the tests.

llvm-mc decodes each input line on its own; one process call handles tens of thousands of lines in well under a
second, while starting a process costs ~20 ms, so everything here works in batches.
"""
from __future__ import annotations

import re
import subprocess

LLVM_MC = "llvm-mc-19"
# s_nop 0x3f1: a separator between probes; never used as a probe itself
MARKER = bytes([0xf1, 0x03, 0x80, 0xbf])
# s_nop 0x3f2 twice: a 4-byte instruction on every target; dropped from the results
PAD_WORD = bytes([0xf2, 0x03, 0x80, 0xbf])
PAD = PAD_WORD * 2
_ENC_RE = re.compile(r"^\s*(.*?)\s*; encoding: \[([0-9a-fx,]*)\]\s*$")


TIMEOUT_S = 120
# llvm-mc's diagnostic for one input line: "<stdin>:LINE:COL: error: ..."
_LINE_ERROR_RE = re.compile(r"^<stdin>:\d+:\d+: error: ", re.M)


class LLVMMCError(RuntimeError):
  """llvm-mc failed as a whole (crashed, timed out, or exited non-zero without per-line errors); returncode is the
  exit status (negative: killed by that signal), None on a timeout."""
  returncode: int | None = None


def _run(args: list[str], text: str, line_errors_expected: bool = False) -> tuple[str, str]:
  """Run llvm-mc on `text`; (stdout, stderr). A non-zero exit is an error, except that with line_errors_expected
  exit status 1 with "<stdin>:L:C: error:" diagnostics is accepted: assemble() feeds lines llvm-mc may reject on
  purpose (it reports each and exits 1) and returns the messages. (Disassembly of invalid bytes only warns, exit 0.)"""
  try:
    proc = subprocess.run(args, input=text, capture_output=True, text=True, check=False, timeout=TIMEOUT_S)
  except subprocess.TimeoutExpired as e:
    raise LLVMMCError(f"{' '.join(args)}: no answer within {TIMEOUT_S} s ({len(text.splitlines())} input lines)") from e
  if proc.returncode != 0 and not (line_errors_expected and proc.returncode == 1 and _LINE_ERROR_RE.search(proc.stderr)):
    err = LLVMMCError(f"{' '.join(args)}: exit status {proc.returncode}; stderr ends: {proc.stderr[-2000:]!r}")
    err.returncode = proc.returncode
    raise err
  return proc.stdout, proc.stderr


def disassemble(probes: list[bytes], mcpu: str = "gfx1100") -> list[list[tuple[str, bytes]]]:
  """For each probe: the list of (text, encoding bytes) llvm-mc decoded from it (empty when invalid). The
  encoding is llvm's re-encoding of what it decoded (unused fields come back as zero)."""
  lines = []
  for p in probes:
    # llvm-mc decodes the bytes of all lines as one stream: an instruction that needs more bytes than its probe
    # holds would swallow the marker, so pad each probe with two harmless dwords
    lines.append(",".join(f"0x{b:02x}" for b in p + PAD))
    lines.append(",".join(f"0x{b:02x}" for b in MARKER))
  try:
    out, _ = _run([LLVM_MC, "-arch=amdgcn", f"-mcpu={mcpu}", "-disassemble", "-show-encoding"], "\n".join(lines) + "\n")
  except LLVMMCError as e:
    # llvm-mc-19 crashes (SIGSEGV) on a few gfx942 words: split the batch until the culprit stands alone, which then
    # counts as undecodable; any other failure (a non-zero exit, a timeout) is raised
    if e.returncode is None or e.returncode >= 0: raise
    if len(probes) == 1: return [[]]
    half = len(probes) // 2
    return disassemble(probes[:half], mcpu) + disassemble(probes[half:], mcpu)
  results: list[list[tuple[str, bytes]]] = [[]]
  for line in out.splitlines():
    m = _ENC_RE.match(line)
    if not m: continue
    enc = bytes(int(x, 16) for x in m.group(2).split(",") if x)
    if enc == MARKER:
      results.append([])
      continue
    if enc == PAD_WORD: continue
    results[-1].append((m.group(1), enc))
  results.pop()  # after the last marker
  if len(results) != len(probes):
    # a probe swallowed a marker (or llvm-mc stopped): split the batch until the culprit stands alone
    if len(probes) == 1: return [[]]
    half = len(probes) // 2
    return disassemble(probes[:half], mcpu) + disassemble(probes[half:], mcpu)
  return results


def assemble(lines: list[str], mcpu: str = "gfx1100") -> list[tuple[str, bytes] | str]:
  """Assemble each line with llvm-mc -show-encoding: (canonical text, encoding) or the error message."""
  marker_text = "s_nop 0x3f1"
  src = []
  for ln in lines: src += [ln, marker_text]
  out, err = _run([LLVM_MC, "-arch=amdgcn", f"-mcpu={mcpu}", "-show-encoding"], "\n".join(src) + "\n",
                  line_errors_expected=True)
  errors: dict[int, str] = {}
  for m in re.finditer(r"^<stdin>:(\d+):\d+: error: (.*)$", err, re.M):
    errors.setdefault((int(m.group(1)) - 1) // 2, m.group(2))
  results: list = [[]]
  for line in out.splitlines():
    m = _ENC_RE.match(line)
    if not m: continue
    enc = bytes(int(x, 16) for x in m.group(2).split(",") if x)
    if enc == MARKER:
      results.append([])
      continue
    results[-1].append((m.group(1), enc))
  results.pop()
  if len(results) != len(lines):  # every line is followed by its own marker line, which llvm-mc always assembles
    raise LLVMMCError(f"llvm-mc gave {len(results)} results for {len(lines)} lines; stderr ends: {err[-2000:]!r}")
  final = []
  for i, r in enumerate(results):
    if i in errors: final.append(errors[i])
    elif len(r) == 1: final.append(r[0])
    else: final.append(f"llvm-mc produced {len(r)} instructions")
  return final
