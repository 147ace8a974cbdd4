"""`hcq disasm FILE [--raw] [--mcpu gfx1100]`: print the instructions of a code object's kernels (or of raw machine
code with --raw) in llvm-objdump's syntax: "<mnemonic operands>  // <ADDRESS>: <DWORDS>"."""
from __future__ import annotations

import sys


def register(subparsers) -> None:
  p = subparsers.add_parser("disasm", help="disassemble an AMDGPU code object (or raw RDNA3 code with --raw)")
  p.add_argument("file", help="HSA code object (ELF), or raw machine code with --raw")
  p.add_argument("--raw", action="store_true", help="FILE is raw instruction bytes, not an ELF")
  p.add_argument("--mcpu", default=None, help="target (default: from the code object, gfx1100 for --raw)")
  p.set_defaults(func=run)


def format_listing(insts, base: int) -> list[str]:
  lines = []
  for inst in insts:
    words = " ".join(f"{int.from_bytes(inst.data[i:i + 4], 'little'):08X}" for i in range(0, inst.size, 4))
    lines.append(f"\t{str(inst):<58} // {base + inst.offset:012X}: {words}")
  return lines


def run(args) -> int:
  from ..compiler.backend.amd.codeobject import CodeObject
  from ..compiler.backend.amd.decode import decode_all
  with open(args.file, "rb") as f:
    data = f.read()
  out = sys.stdout
  if args.raw:
    for line in format_listing(decode_all(data, arch=args.mcpu or "gfx1100"), 0): print(line, file=out)
    return 0
  co = CodeObject.parse(data)
  arch = args.mcpu or co.mach
  print(f"{args.file}:\tfile format elf64-amdgpu\t{co.target}\n", file=out)
  for k in sorted(co.kernels.values(), key=lambda k: k.entry_address):
    print(f"{k.entry_address:016x} <{k.name}>:", file=out)
    for line in format_listing(decode_all(k.code, arch=arch), k.entry_address): print(line, file=out)
    print(file=out)
  return 0
