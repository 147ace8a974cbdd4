"""`hcq run CODE_OBJECT --kernel NAME --grid X[,Y,Z] --block X[,Y,Z] ARG...`: run one kernel of a code object.

ARG is one of:
  FILE.npy          a buffer initialised from the array; written back to OUTDIR/argI.npy (same dtype and shape)
  N  or  N:DTYPE    a zeroed buffer of N elements of DTYPE (default uint8); written to OUTDIR/argI.npy
  =VALUE            a scalar (integer or float literal), e.g. =1024 or =0.5; for a __local pointer argument, the
                    size in bytes of its LDS block
--grid counts work-groups (as a DISPATCH_DIRECT packet does), --block threads per work-group."""
from __future__ import annotations

import os

from . import CommandError, UsageError, device_spec


def _dims(option: str, text: str) -> tuple[int, ...]:
  try: dims = tuple(int(x) for x in text.split(","))
  except ValueError: dims = ()
  if not 1 <= len(dims) <= 3 or any(d <= 0 for d in dims):
    raise UsageError(f"{option} {text!r}: give 1 to 3 positive integers X[,Y[,Z]]")
  return dims


# element types of N:DTYPE buffers: numbers and bools (not objects, strings or records, whose bytes mean nothing to
# a kernel)
_NUMERIC_KINDS = "biufc"


def _parse_arg(text: str):
  import numpy as np
  if text.startswith("="):
    lit = text[1:]
    try: return ("scalar", int(lit, 0))
    except ValueError: pass
    try: return ("scalar", float(lit))
    except ValueError: raise UsageError(f"argument {text!r}: {lit!r} is not a number") from None
  if text.endswith(".npy"):
    return ("array", _load(text))
  count, _, dtype = text.partition(":")
  try: n = int(count, 0)
  except ValueError: raise UsageError(f"argument {text!r} is neither FILE.npy, N[:DTYPE] nor =VALUE") from None
  try: dt = np.dtype(dtype or "uint8")
  except (TypeError, ValueError): raise UsageError(f"argument {text!r}: unknown dtype {dtype!r}") from None
  if dt.kind not in _NUMERIC_KINDS or dt.hasobject:
    raise UsageError(f"argument {text!r}: dtype {dt} is not a number type (e.g. float32, int32, uint8)")
  if n <= 0: raise UsageError(f"argument {text!r}: a buffer needs a positive number of elements, not {n}")
  return ("array", np.zeros(n, dt))


def _load(path: str):
  import numpy as np
  try: a = np.load(path, allow_pickle=False)
  except OSError as e: raise CommandError(f"cannot read {path}: {e.strerror or e}") from None
  except Exception as e:  # noqa: BLE001 - numpy raises ValueError, EOFError, ... on a corrupt file
    raise CommandError(f"{path} is not a plain numpy array file ({type(e).__name__}: {e})") from None
  if not isinstance(a, np.ndarray) or a.dtype.kind not in _NUMERIC_KINDS or a.dtype.hasobject:
    raise CommandError(f"{path}: a buffer needs an array of numbers, not {type(a).__name__} {getattr(a, 'dtype', '')}")
  return a


def _out_folder(path: str) -> str:
  """The output folder, made before anything runs: a file of that name, or one that cannot be made, stops here."""
  if os.path.exists(path) and not os.path.isdir(path):
    raise UsageError(f"--out {path!r} is a file, not a folder")
  try: os.makedirs(path, exist_ok=True)
  except OSError as e: raise CommandError(f"cannot make the output folder {path}: {e.strerror or e}") from None
  return path


def _read_code_object(path: str) -> bytes:
  try:
    with open(path, "rb") as f: return f.read()
  except OSError as e: raise CommandError(f"cannot read the code object {path}: {e.strerror or e}") from None


def run(args) -> int:
  import numpy as np
  from .. import open as open_device
  grid, block = _dims("--grid", args.grid), _dims("--block", args.block)
  parsed = [_parse_arg(a) for a in args.args]
  code = _read_code_object(args.code_object)
  out_dir = _out_folder(args.out)
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
    for i, buf, like in bufs:
      out = np.frombuffer(dev.copyout(buf, like.nbytes), like.dtype).reshape(like.shape)
      path = os.path.join(out_dir, f"arg{i}.npy")
      try: np.save(path, out)
      except OSError as e: raise CommandError(f"cannot write {path}: {e.strerror or e}") from None
      print(f"arg{i}: {out.dtype} {out.shape} -> {path}")
  print(f"{prog.name} on {dev.name} ({type(dev.os).__name__}): grid {grid} x block {block}, {t * 1e6:.1f} us")
  return 0


def _options(parser, defaults=None) -> None:
  d = defaults or {}
  parser.add_argument("--kernel", default=d.get("kernel"), help="kernel name (default: the only kernel)")
  parser.add_argument("--grid", default=d.get("grid", "1"), help="work-groups X[,Y,Z] (default 1)")
  parser.add_argument("--block", default=d.get("block", "1"), help="threads per work-group X[,Y,Z] (default 1)")
  parser.add_argument("--device", type=device_spec, default=d.get("device"), help="device spec (default: HCQ_DEV, else the first real "
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
  p.add_argument("code_object", metavar="CODE_OBJECT", help="an AMD HSA code object (ELF), e.g. built by clang-19; "
                                                           "for QCOM an ir3 program in Mesa computerator's format")
  p.add_argument("rest", nargs=argparse.REMAINDER, metavar="ARG", help="buffers and scalars in the kernel's argument "
                                                                      "order (see above); options may follow")
  p.set_defaults(func=lambda a: run(_reparse(a)))
