"""MIMG address registers (gfx11 image instructions): how many address VGPRs an opcode and DIM take, and how the
non-sequential-address (NSA) form lays them out. Shared by the decoder (instruction sizes), the disassembler (operand
text) and the assembler (operand checks)."""
from __future__ import annotations


NSA_MAX_BYTES = 4   # gfx11 MIMG-NSA: one extra dword (llvm-mc-19 -mcpu=gfx1100 never encodes more: 12-byte NSA forms)


def nsa_layout(naddr: int) -> list[int]:
  """Register counts of the addresses after VADDR in a gfx11 NSA instruction: one each, except that the last of at
  most NSA_MAX_BYTES is a range holding the remaining ones (llvm-objdump-19 prints e.g. [v16, v40, v41, v42, v[43:44]]
  for six addresses)."""
  rest = max(naddr - 1, 0)
  if rest <= NSA_MAX_BYTES: return [1] * rest
  return [1] * (NSA_MAX_BYTES - 1) + [rest - (NSA_MAX_BYTES - 1)]


def mimg_address_count(et, opcode: int, fields: dict) -> int:
  """Address VGPRs of a MIMG instruction: by opcode and DIM as llvm-mc-19 counts them (the generated vaddr_by_dim),
  fewer with A16 (16-bit addresses packed two to a VGPR: vaddr_by_dim_a16)."""
  extra = et.extra[opcode]
  by_dim = extra["vaddr_by_dim"]
  if fields.get("a16") and extra["vaddr_by_dim_a16"] is not None: by_dim = extra["vaddr_by_dim_a16"]
  count = by_dim[fields["dim"]] if fields["dim"] < len(by_dim) else None
  if count is None:  # a dim LLVM does not accept for this opcode: fall back to the 1-D template
    count = next((t[3] for t in et.ops[opcode][2] if t[0] == "reg" and t[1] == "vaddr"), 1)
  return count
