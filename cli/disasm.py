"""`hcq disasm FILE [--raw] [--mcpu gfx1100] [--kernel NAME ...]`: print the instructions of a code object's kernels
(or of raw machine code with --raw) in llvm-objdump's syntax: "<mnemonic operands>  // <ADDRESS>: <DWORDS>".

`hcq disasm --isa ir3 --gpu-id 630 --raw FILE`: Adreno shader code (64-bit little-endian instruction words), one line
per word, exactly the text Mesa 25's ir3 disassembler prints for it (no address, no hex) for that GPU's generation
(--gpu-id 630: a6xx; 730 or 740: a7xx; or --chip-id 43050a01 looked up in Mesa's device table as Mesa's
ir3-disasm -c does; Mesa decodes for chip * 100); a word that decodes to no instruction prints
"no match: <hex>" as Mesa's ir3-disasm does (--no-match raw: "raw 0x..." as ir3_shader_disasm and Mesa's disasm.c
test print it), and one whose operand matches nothing (or sets bits the
description says are don't-care) gets Mesa's "\t; <errors>" after its text: either makes the exit status 1.
A dword that is no instruction is printed as llvm-objdump-19 prints it, `.long 0x...` (trailing bytes `.byte ...`),
and the listing goes on at the next dword.

A missing or unreadable file, a file that is not an AMDGPU ELF or a --kernel the code object does not have are
reported in one line (exit status 1); an unknown --mcpu or --kernel with --raw are usage errors (exit status 2)."""
from __future__ import annotations

import sys

from . import CommandError, UsageError
from .inputs import read_input


def register(subparsers) -> None:
  p = subparsers.add_parser("disasm", help="disassemble an AMDGPU code object (or raw RDNA3 code with --raw)")
  p.add_argument("file", help="HSA code object (ELF), or raw machine code with --raw")
  p.add_argument("--raw", action="store_true", help="FILE is raw instruction bytes, not an ELF")
  p.add_argument("--mcpu", default=None, help="target (default: from the code object, gfx1100 for --raw)")
  p.add_argument("--isa", choices=("amdgpu", "ir3"), default="amdgpu",
                 help="instruction set: amdgpu (default) or ir3 (Adreno shaders; needs --raw)")
  p.add_argument("--gpu-id", type=int, default=630,
                 help="ir3: the Adreno GPU id whose encodings apply: 630 (a6xx), 730/740 (a7xx)... (default 630)")
  p.add_argument("--chip-id", default=None, metavar="HEX",
                 help="ir3: the Adreno chip id (as KGSL reports it, e.g. 43050a01 for a740) whose generation applies, "
                      "found in Mesa's device table as Mesa's ir3-disasm -c does")
  p.add_argument("--no-match", choices=("plain", "raw"), default="plain",
                 help="ir3: how a word that is no instruction prints: 'no match: <hex>' (Mesa's ir3-disasm, default) "
                      "or 'raw 0x..' (Mesa's ir3_shader_disasm and its disasm.c test)")
  p.add_argument("--kernel", action="append", default=None, metavar="NAME",
                 help="only this kernel (repeatable; default: every kernel of the code object)")
  p.set_defaults(func=run)


class _Data:
  """Bytes that decode to no instruction, shown as data the way llvm-objdump-19 shows them: `.long 0x...` for a
  dword, `.byte 0x.., ...` for the 1 to 3 bytes at the end of the code."""

  def __init__(self, data: bytes, offset: int):
    self.data, self.offset, self.size = data, offset, len(data)

  def __str__(self) -> str:
    if self.size == 4: return f".long {int.from_bytes(self.data, 'little'):#010x}"
    return ".byte " + ", ".join(f"{b:#04x}" for b in self.data)


def listing(code: bytes, arch: str) -> list:
  """The instructions of code, in order; where one cannot be decoded, its first dword (or the trailing bytes) as
  data, then on with the next dword (as llvm-objdump does)."""
  from ..compiler.isa.amd.decode import decode
  from ..compiler.isa.amd.errors import DecodeError
  out, off = [], 0
  while off < len(code):
    try: inst = decode(code, off, arch)
    except DecodeError: inst = _Data(code[off:off + 4], off)
    out.append(inst)
    off += inst.size
  return out


def format_listing(insts, base: int) -> list[str]:
  lines = []
  for inst in insts:
    if inst.size % 4: words = " ".join(f"{b:02X}" for b in inst.data)   # llvm-objdump: trailing bytes one by one
    else: words = " ".join(f"{int.from_bytes(inst.data[i:i + 4], 'little'):08X}" for i in range(0, inst.size, 4))
    lines.append(f"\t{str(inst):<58} // {base + inst.offset:012X}: {words}")
  return lines


def _read(path: str) -> bytes:
  return read_input(path, "the file to disassemble")


def _check_arch(arch: str, source: str) -> str:
  """arch: from --mcpu (source "--mcpu", a usage error when unknown) or from the code object's e_flags (a file the
  tables cannot read: a failure)."""
  from ..compiler.isa.amd.tables import SUPPORTED_ARCHS
  if arch not in SUPPORTED_ARCHS:
    have = ", ".join(SUPPORTED_ARCHS)
    if source == "--mcpu": raise UsageError(f"no instruction tables for --mcpu {arch} (have: {have})")
    raise CommandError(f"{source} is for {arch}, which has no instruction tables (have: {have}; --mcpu picks one)")
  return arch


def _selected(co, names: list[str] | None, path: str) -> list:
  kernels = sorted(co.kernels.values(), key=lambda k: k.entry_address)
  if not names: return kernels
  unknown = [n for n in names if n not in co.kernels]
  if unknown:
    have = ", ".join(k.name for k in kernels) or "none"
    raise CommandError(f"{path} has no kernel {', '.join(map(repr, unknown))} (kernels: {have})")
  return [k for k in kernels if k.name in names]


IR3_GPU_IDS = range(300, 800)   # a3xx .. a7xx: the generations Mesa's ir3 description covers


def run_ir3(args, data: bytes) -> int:
  from ..compiler.isa.ir3.isa import ISA, DecodeError
  if not args.raw: raise UsageError("--isa ir3 reads raw instruction words: add --raw")
  if args.mcpu or args.kernel: raise UsageError("--mcpu and --kernel are for --isa amdgpu")
  if args.gpu_id not in IR3_GPU_IDS: raise UsageError(f"--gpu-id {args.gpu_id}: expected an Adreno id in 300..799")
  gpu_id = args.gpu_id
  if args.chip_id is not None:
    # Mesa's isa/ir3-disasm.c -c: fd_dev_info_raw of the chip id, decoded for its generation (chip * 100)
    from ..autogen.qcom.devices import DEVICES
    try: chip = int(args.chip_id, 16)
    except ValueError: raise UsageError(f"--chip-id {args.chip_id}: not a hexadecimal number") from None
    dev = DEVICES.lookup(chip)
    if dev is None: raise UsageError(f"--chip-id {args.chip_id}: no Adreno of that chip id in Mesa's device table")
    gpu_id = dev.generation * 100
  if len(data) % 8: raise CommandError(f"{args.file}: {len(data)} bytes is not a whole number of 64-bit instructions")
  isa, failed = ISA(gpu_id), 0
  for i in range(0, len(data), 8):
    word = int.from_bytes(data[i:i + 8], "little")
    try: print(isa.disasm_word(word, errors=True))
    except DecodeError:
      print(isa.no_match_text(word, args.no_match))
      failed += 1
      continue
    if isa.errors: failed += 1
  if failed: raise CommandError(f"{args.file}: {failed} of {len(data) // 8} words are no valid ir3 instruction for gpu {gpu_id}")
  return 0


def run(args) -> int:
  from ..compiler.isa.amd.codeobject import CodeObject
  from ..compiler.isa.amd.errors import CodeObjectError
  data = _read(args.file)
  if args.isa == "ir3": return run_ir3(args, data)
  if args.gpu_id != 630 or args.no_match != "plain" or args.chip_id is not None:
    raise UsageError("--gpu-id, --chip-id and --no-match are for --isa ir3")
  out = sys.stdout
  if args.raw:
    if args.kernel: raise UsageError("--kernel needs a code object, not --raw bytes")
    for line in format_listing(listing(data, _check_arch(args.mcpu or "gfx1100", "--mcpu")), 0): print(line, file=out)
    return 0
  try:
    co = CodeObject.parse(data)
  except CodeObjectError as e:
    hint = " (for raw machine code use --raw)" if not data.startswith(b"\x7fELF") else ""
    raise CommandError(f"{args.file}: {e}{hint}") from None
  arch = _check_arch(args.mcpu, "--mcpu") if args.mcpu else _check_arch(co.mach, args.file)
  kernels = _selected(co, args.kernel, args.file)
  print(f"{args.file}:\tfile format elf64-amdgpu\t{co.target}\n", file=out)
  for k in kernels:
    print(f"{k.entry_address:016x} <{k.name}>:", file=out)
    for line in format_listing(listing(k.code, arch), k.entry_address): print(line, file=out)
    print(file=out)
  return 0
