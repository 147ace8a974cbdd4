#!/usr/bin/env python3
"""Generate fallback_opcodes.json: opcode -> LLVM mnemonic per gfx11 encoding, by asking llvm-mc-19 to disassemble
one word per opcode (the oracle). Temporary: the emulator switches to hcq.compiler.backend.amd.decode's tables as
soon as they land; this only keeps the emulator testable until then.

    python3 mockgpu/amd/emu/gen_fallback_opcodes.py
"""
from __future__ import annotations

import json
import os
import re
import struct
import subprocess
from concurrent.futures import ThreadPoolExecutor

# (encoding, number of opcodes, function op -> dwords). Field positions: RDNA3 ISA reference guide, chapter 15
# ("Microcode formats").
ENCODINGS = [
  ("SOP2", 128, lambda op: [0x80000000 | op << 23]),
  ("SOPK", 32, lambda op: [0xB0000000 | op << 23]),
  ("SOP1", 256, lambda op: [0xBE800000 | op << 8]),
  ("SOPC", 128, lambda op: [0xBF000000 | op << 16]),
  ("SOPP", 128, lambda op: [0xBF800000 | op << 16]),
  ("SMEM", 256, lambda op: [0xF4000000 | op << 18, 0xF8000000]),
  ("VOP2", 64, lambda op: [op << 25]),
  ("VOP1", 256, lambda op: [0x7E000000 | op << 9]),
  ("VOPC", 256, lambda op: [0x7C000000 | op << 17]),
  ("VOP3", 1024, lambda op: [0xD4000000 | op << 16, 0x100 | 0x101 << 9 | 0x102 << 18]),
  ("VOP3P", 128, lambda op: [0xCC000000 | op << 16 | 0x4000, 0x18000000 | 0x100 | 0x101 << 9 | 0x102 << 18]),
  ("DS", 256, lambda op: [0xD8000000 | op << 18, 0]),
  ("FLAT", 128, lambda op: [0xDC000000 | op << 18, 0x007C0000]),
  ("GLOBAL", 128, lambda op: [0xDC000000 | 2 << 16 | op << 18, 0x007C0000]),
  ("SCRATCH", 128, lambda op: [0xDC000000 | 1 << 16 | op << 18, 0x007C0000]),
  ("VOPD_X", 16, lambda op: [0xC8000000 | op << 22 | 16 << 17, 0x00000000]),   # opy 16 = v_dual_mov_b32
  ("VOPD_Y", 32, lambda op: [0xC8000000 | 8 << 22 | op << 17, 0x00000000]),   # opx 8 = v_dual_mov_b32
]


def disassemble_any(words: list[int]) -> str | None:
  """Try the word as given, then with src2 (and src1) cleared, then with a literal dword appended."""
  tries = [words, words + [0x3F800000]]
  if len(words) == 2:
    tries[1:1] = [[words[0], words[1] & ~(0x1FF << 18)], [words[0], words[1] & 0x1FF]]
  for t in tries:
    text = disassemble(t)
    if text: return text
  return None


def disassemble(words: list[int]) -> str | None:
  data = ",".join(f"0x{b:02x}" for b in b"".join(struct.pack("<I", w) for w in words))
  proc = subprocess.run(["llvm-mc-19", "-arch=amdgcn", "-mcpu=gfx1100", "-disassemble"], input=data,
                        capture_output=True, text=True)
  if "invalid" in proc.stderr: return None
  out = proc.stdout
  lines = [ln.strip() for ln in out.splitlines() if ln.strip() and not ln.strip().startswith(".")]
  return lines[0] if len(lines) == 1 else None


def mnemonic(text: str, encoding: str) -> str:
  m = text.split()[0]
  if encoding == "VOPD_X": return m
  if encoding == "VOPD_Y": return text.split("::")[1].split()[0] if "::" in text else m
  return re.sub(r"_e(32|64)$", "", m)


def main() -> None:
  table = {}
  with ThreadPoolExecutor(4) as pool:
    for enc, count, make in ENCODINGS:
      texts = list(pool.map(lambda op: disassemble_any(make(op)), range(count)))
      table[enc] = {op: mnemonic(t, enc) for op, t in enumerate(texts) if t}
      print(enc, len(table[enc]))
  path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fallback_opcodes.json")
  with open(path, "w") as f: json.dump(table, f, indent=0, sort_keys=True)


if __name__ == "__main__":
  main()
