"""`hcq run CODE_OBJECT --kernel NAME --grid X[,Y,Z] --block X[,Y,Z] ARG...`: run one kernel of a code object.

ARG is one of:
  FILE.npy          a buffer initialised from the array; written back to OUTDIR/argI.npy (same dtype and shape)
  N  or  N:DTYPE    a zeroed buffer of N elements of DTYPE (default uint8); written to OUTDIR/argI.npy
  =VALUE            a scalar (integer or float literal), e.g. =1024 or =0.5; for a __local pointer argument, the
                    size in bytes of its LDS block
--grid counts work-groups (as a DISPATCH_DIRECT packet does), --block threads per work-group."""
from __future__ import annotations

import os
import sys


def _dims(text: str) -> tuple[int, ...]:
  try: dims = tuple(int(x) for x in text.split(","))
  except ValueError: raise SystemExit(f"hcq run: bad dimensions {text!r} (use X[,Y[,Z]])") from None
  if not 1 <= len(dims) <= 3: raise SystemExit(f"hcq run: bad dimensions {text!r} (use X[,Y[,Z]])")
  return dims


def _parse_arg(text: str):
  import numpy as np
  if text.startswith("="):
    lit = text[1:]
    try: return ("scalar", int(lit, 0))
    except ValueError: pass
    try: return ("scalar", float(lit))
    except ValueError: raise SystemExit(f"hcq run: {text!r} is not a number") from None
  if text.endswith(".npy"):
    return ("array", _load(text))
  count, _, dtype = text.partition(":")
  try: n = int(count, 0)
  except ValueError: raise SystemExit(f"hcq run: argument {text!r} is neither FILE.npy, N[:DTYPE] nor =VALUE") from None
  try: dt = np.dtype(dtype or "uint8")
  except TypeError: raise SystemExit(f"hcq run: unknown dtype {dtype!r}") from None
  if n <= 0: raise SystemExit(f"hcq run: buffer of {n} elements")
  return ("array", np.zeros(n, dt))


def _load(path: str):
  import numpy as np
  try: return np.load(path, allow_pickle=False)
  except OSError as e: raise SystemExit(f"hcq run: cannot read {path}: {e.strerror or e}") from None
  except ValueError as e: raise SystemExit(f"hcq run: {path} is not a plain numpy array file: {e}") from None


def run(args) -> int:
  import numpy as np
  from .. import open as open_device
  try:
    with open(args.code_object, "rb") as f: code = f.read()
  except OSError as e: raise SystemExit(f"hcq run: cannot read the code object {args.code_object}: {e.strerror or e}") from None
  parsed = [_parse_arg(a) for a in args.args]
  grid, block = _dims(args.grid), _dims(args.block)
  with open_device(args.device) as dev:
    prog = dev.load(code, args.kernel)
    values, bufs = [], []
    for i, (kind, v) in enumerate(parsed):
      if kind == "scalar": values.append(v); continue
      buf = dev.alloc(max(v.nbytes, 1))
      if v.nbytes: dev.copyin(buf, np.ascontiguousarray(v))
      bufs.append((i, buf, v))
      values.append(buf)
    t = prog(*values, global_size=grid, local_size=block, wait=True)
    os.makedirs(args.out, exist_ok=True)
    for i, buf, like in bufs:
      out = np.frombuffer(dev.copyout(buf, like.nbytes), like.dtype).reshape(like.shape)
      path = os.path.join(args.out, f"arg{i}.npy")
      np.save(path, out)
      print(f"arg{i}: {out.dtype} {out.shape} -> {path}")
  print(f"{prog.name} on {dev.name} ({type(dev.os).__name__}): grid {grid} x block {block}, {t * 1e6:.1f} us")
  return 0


def _options(parser, defaults=None) -> None:
  d = defaults or {}
  parser.add_argument("--kernel", default=d.get("kernel"), help="kernel name (default: the only kernel)")
  parser.add_argument("--grid", default=d.get("grid", "1"), help="work-groups X[,Y,Z] (default 1)")
  parser.add_argument("--block", default=d.get("block", "1"), help="threads per work-group X[,Y,Z] (default 1)")
  parser.add_argument("--device", default=d.get("device"), help="device spec (default: HCQ_DEV, else the first real "
                                                                "GPU, else MOCK+AMD)")
  parser.add_argument("--out", default=d.get("out", "."), help="folder for the output .npy files (default .)")


def _reparse(args):
  """Options may come before or after CODE_OBJECT, mixed with the ARGs: those before it are parsed by the
  sub-command's parser, the rest of the command line here with argparse's intermixed parsing (a plain sub-command
  parser cannot take positionals after options), keeping the earlier values as defaults."""
  import argparse
  inner = argparse.ArgumentParser(prog="hcq run CODE_OBJECT", add_help=False)
  _options(inner, vars(args))
  inner.add_argument("args", nargs="*")
  ns = inner.parse_intermixed_args(args.rest)
  ns.code_object = args.code_object
  return ns


def register(sub) -> None:
  import argparse
  p = sub.add_parser("run", help="run a kernel of a code object with buffers from .npy files or sizes",
                     description=__doc__.split("\n\n", 1)[1], formatter_class=argparse.RawDescriptionHelpFormatter,
                     usage="hcq run CODE_OBJECT [--kernel NAME] [--grid X[,Y,Z]] [--block X[,Y,Z]] [--device SPEC] "
                           "[--out DIR] ARG...",
                     epilog="example: hcq run demo.hsaco --kernel vadd --grid 4 --block 256 a.npy b.npy 1024:float32 =1024")
  _options(p)
  p.add_argument("code_object", metavar="CODE_OBJECT", help="an AMD HSA code object (ELF), e.g. built by clang-19")
  p.add_argument("rest", nargs=argparse.REMAINDER, metavar="ARG", help="buffers and scalars in the kernel's argument "
                                                                      "order (see above); options may follow")
  p.set_defaults(func=lambda a: run(_reparse(a)))
