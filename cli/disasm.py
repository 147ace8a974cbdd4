"""`hcq disasm FILE [--raw] [--mcpu gfx1100] [--kernel NAME ...]`: print the instructions of a code object's kernels
(or of raw machine code with --raw) in llvm-objdump's syntax: "<mnemonic operands>  // <ADDRESS>: <DWORDS>".

A missing or unreadable file, a file that is not an AMDGPU ELF, an unknown --mcpu or a --kernel the code object does
not have are reported in one line (exit status 1), never with a traceback."""
from __future__ import annotations

import sys


class DisasmUsageError(Exception):
  """A request `hcq disasm` cannot serve: the message says what and what would work."""


def register(subparsers) -> None:
  p = subparsers.add_parser("disasm", help="disassemble an AMDGPU code object (or raw RDNA3 code with --raw)")
  p.add_argument("file", help="HSA code object (ELF), or raw machine code with --raw")
  p.add_argument("--raw", action="store_true", help="FILE is raw instruction bytes, not an ELF")
  p.add_argument("--mcpu", default=None, help="target (default: from the code object, gfx1100 for --raw)")
  p.add_argument("--kernel", action="append", default=None, metavar="NAME",
                 help="only this kernel (repeatable; default: every kernel of the code object)")
  p.set_defaults(func=run)


def format_listing(insts, base: int) -> list[str]:
  lines = []
  for inst in insts:
    words = " ".join(f"{int.from_bytes(inst.data[i:i + 4], 'little'):08X}" for i in range(0, inst.size, 4))
    lines.append(f"\t{str(inst):<58} // {base + inst.offset:012X}: {words}")
  return lines


def _read(path: str) -> bytes:
  try:
    with open(path, "rb") as f: return f.read()
  except OSError as e:
    raise DisasmUsageError(f"cannot read {path}: {e.strerror or e}") from None


def _check_arch(arch: str) -> str:
  from ..compiler.backend.amd.tables import SUPPORTED_ARCHS
  if arch not in SUPPORTED_ARCHS:
    raise DisasmUsageError(f"no instruction tables for --mcpu {arch} (have: {', '.join(SUPPORTED_ARCHS)})")
  return arch


def _selected(co, names: list[str] | None, path: str) -> list:
  kernels = sorted(co.kernels.values(), key=lambda k: k.entry_address)
  if not names: return kernels
  unknown = [n for n in names if n not in co.kernels]
  if unknown:
    have = ", ".join(k.name for k in kernels) or "none"
    raise DisasmUsageError(f"{path} has no kernel {', '.join(map(repr, unknown))} (kernels: {have})")
  return [k for k in kernels if k.name in names]


def run(args) -> int:
  try:
    return _run(args)
  except DisasmUsageError as e:
    print(f"hcq disasm: error: {e}", file=sys.stderr)
    return 1
  except BrokenPipeError:   # `hcq disasm FILE | head`: the reader has what it wanted
    import os
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


def _run(args) -> int:
  from ..compiler.backend.amd.codeobject import CodeObject
  from ..compiler.backend.amd.decode import decode_all
  from ..compiler.backend.amd.errors import CodeObjectError
  data = _read(args.file)
  out = sys.stdout
  if args.raw:
    if args.kernel: raise DisasmUsageError("--kernel needs a code object, not --raw bytes")
    for line in format_listing(decode_all(data, arch=_check_arch(args.mcpu or "gfx1100")), 0): print(line, file=out)
    return 0
  try:
    co = CodeObject.parse(data)
  except CodeObjectError as e:
    hint = " (for raw machine code use --raw)" if not data.startswith(b"\x7fELF") else ""
    raise DisasmUsageError(f"{args.file}: {e}{hint}") from None
  arch = _check_arch(args.mcpu or co.mach)
  kernels = _selected(co, args.kernel, args.file)
  print(f"{args.file}:\tfile format elf64-amdgpu\t{co.target}\n", file=out)
  for k in kernels:
    print(f"{k.entry_address:016x} <{k.name}>:", file=out)
    for line in format_listing(decode_all(k.code, arch=arch), k.entry_address): print(line, file=out)
    print(file=out)
  return 0
