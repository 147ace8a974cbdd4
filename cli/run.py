"""`hcq run CODE_OBJECT --kernel NAME --grid X[,Y,Z] --block X[,Y,Z] ARG...`: run one kernel of a code object.

ARG is one of:
  FILE.npy          a buffer initialised from the array; written back to OUTDIR/argI.npy (same dtype and shape)
  N  or  N:DTYPE    a zeroed buffer of N elements of DTYPE (default uint8); written to OUTDIR/argI.npy
  =VALUE            a scalar (integer or float literal), e.g. =1024 or =0.5; for a __local pointer argument, the
                    size in bytes of its LDS block
--grid counts work-groups (as a DISPATCH_DIRECT packet does), --block threads per work-group."""
from __future__ import annotations

import dataclasses
import os

from . import CommandError, UsageError, device_spec
from .inputs import open_input, read_input


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


# a .npy input or output moves between its file and the device this many bytes at a time: `hcq run` never holds a
# whole array in host memory besides the device's own copy (its peak is the device's memory and a chunk)
CHUNK_BYTES = 4 << 20


def _nbytes(dtype, shape) -> int:
  n = dtype.itemsize
  for d in shape: n *= int(d)
  return n


@dataclasses.dataclass(frozen=True)
class NpyInput:
  """A .npy file's array, not yet read: its header (checked) and where its data starts."""
  path: str
  dtype: object
  shape: tuple
  fortran: bool
  offset: int

  @property
  def nbytes(self) -> int: return _nbytes(self.dtype, self.shape)

  def copy_to(self, dev, buf) -> None:
    """Copy the array's bytes (C order) into buf, CHUNK_BYTES at a time from the file (never a whole copy in memory)."""
    import numpy as np
    with open_input(self.path, "the array file", limit=None) as (f, st):
      if self.fortran:    # the file holds the transpose of C order: map it, and let numpy lay it out (one copy)
        a = np.memmap(f, self.dtype, "r", self.offset, self.shape, order="F")
        dev.copyin(buf, np.ascontiguousarray(a))
        return
      f.seek(self.offset)
      done = 0
      while done < self.nbytes:
        chunk = f.read(min(CHUNK_BYTES, self.nbytes - done))
        if not chunk: raise CommandError(f"{self.path} ended after {self.offset + done} bytes, short of its array")
        dev.copyin(buf, chunk, done)
        done += len(chunk)


def _load(path: str) -> NpyInput:
  """The .npy file's header, checked (a regular file, numbers, data as long as the header says); the data is read
  only when it is copied to the device."""
  import numpy as np
  fmt = np.lib.format
  with open_input(path, "the array file", limit=None) as (f, st):
    try:
      version = fmt.read_magic(f)
      if version not in ((1, 0), (2, 0), (3, 0)): raise ValueError(f"unknown .npy format version {version}")
      read_header = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
      shape, fortran, dtype = read_header(f, max_header_size=1 << 16)
      offset = f.tell()
    except OSError as e: raise CommandError(f"cannot read {path}: {e.strerror or e}") from None
    except Exception as e:  # noqa: BLE001 - numpy raises ValueError, EOFError, ... on a corrupt header
      raise CommandError(f"{path} is not a plain numpy array file ({type(e).__name__}: {e})") from None
  if dtype.kind not in _NUMERIC_KINDS or dtype.hasobject:
    raise CommandError(f"{path}: a buffer needs an array of numbers, not ndarray {dtype}")
  a = NpyInput(path, dtype, tuple(shape), bool(fortran), offset)
  if st.st_size < offset + a.nbytes:
    raise CommandError(f"{path}: the header says {a.nbytes} bytes of {dtype} {a.shape}, the file holds "
                       f"{st.st_size - offset}")
  return a


def _save(dev, buf, path: str, dtype, shape) -> None:
  """Write buf's first bytes as a C-order .npy of dtype and shape, CHUNK_BYTES at a time from the device."""
  import numpy as np
  fmt = np.lib.format
  header = {"descr": fmt.dtype_to_descr(dtype), "fortran_order": False, "shape": tuple(shape)}
  nbytes = _nbytes(dtype, shape)
  try:
    with open(path, "wb") as f:
      try: fmt.write_array_header_1_0(f, header)
      except ValueError: fmt.write_array_header_2_0(f, header)    # a header over 64 KiB
      for off in range(0, nbytes, CHUNK_BYTES): f.write(dev.copyout(buf, min(CHUNK_BYTES, nbytes - off), off))
  except OSError as e: raise CommandError(f"cannot write {path}: {e.strerror or e}") from None


def _out_folder(path: str) -> str:
  """The output folder, made before anything runs: a file of that name, or one that cannot be made, stops here."""
  if os.path.exists(path) and not os.path.isdir(path):
    raise UsageError(f"--out {path!r} is a file, not a folder")
  try: os.makedirs(path, exist_ok=True)
  except OSError as e: raise CommandError(f"cannot make the output folder {path}: {e.strerror or e}") from None
  return path


def _read_code_object(path: str) -> bytes:
  return read_input(path, "the code object")


def run(args) -> int:
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
      if isinstance(v, NpyInput): v.copy_to(dev, buf)
      bufs.append((i, buf, v))
      values.append(buf)
    t = prog(*values, global_size=grid, local_size=block, wait=True)
    for i, buf, like in bufs:
      path = os.path.join(out_dir, f"arg{i}.npy")
      _save(dev, buf, path, like.dtype, like.shape)
      print(f"arg{i}: {like.dtype} {tuple(like.shape)} -> {path}")
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
