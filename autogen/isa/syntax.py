"""Splitting LLVM AMDGPU assembly text into mnemonic, operands and trailing modifiers (shared by the table
generator and hcq's assembler; no dependencies)."""
from __future__ import annotations


def split_operands(text: str) -> tuple[str, list[str], list[str]]:
  """'mnem a, b, c mod1 mod2' -> (mnem, [a, b, c], [mod1, mod2]); commas inside () or [] do not split."""
  mnem, _, rest = text.strip().partition(" ")
  rest = rest.strip()
  parts, depth, cur = [], 0, ""
  for ch in rest:
    if ch in "([": depth += 1
    elif ch in ")]": depth -= 1
    if ch == "," and depth == 0:
      parts.append(cur.strip())
      cur = ""
    else:
      cur += ch
  if cur.strip(): parts.append(cur.strip())
  mods: list[str] = []
  if parts:
    last = parts[-1]
    # split trailing space-separated modifiers, unless the operand is itself space-separated (s_waitcnt, s_delay_alu)
    toks, depth, cur = [], 0, ""
    for ch in last:
      if ch in "([": depth += 1
      elif ch in ")]": depth -= 1
      if ch == " " and depth == 0:
        toks.append(cur)
        cur = ""
      else:
        cur += ch
    toks.append(cur)
    if len(toks) > 1 and not any(t == "|" or t.startswith(("vmcnt", "expcnt", "lgkmcnt", "instid", "instskip", "depctr_")) for t in toks):
      parts[-1] = toks[0]
      mods = toks[1:]
  return mnem, parts, mods
