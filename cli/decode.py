"""`hcq decode`: print PM4 or SDMA dword streams with packet and field names, or NV GPFIFO pushbuffers with the
method names of each class.

From a file (raw little-endian dwords, or text with one hex dword per token) or from the rings of a device after
running the demo vector add on it (--device SPEC: an AMD device's PM4 and SDMA rings, an NV device's compute and
copy pushbuffers). --qcom reads an Adreno CP stream instead (type-4 register writes named by the a6xx register table,
type-7 packets by the adreno_pm4 opcodes; parity checked)."""
from __future__ import annotations

import re
import sys

from . import CommandError, UsageError, device_spec
from .inputs import read_input


def _read_words(path: str) -> list[int]:
  data = read_input(path, "the dword stream")
  try: text = data.decode("ascii")
  except UnicodeDecodeError: text = None
  if text is not None and re.fullmatch(r"[\s0-9a-fA-FxX,\[\]]*", text) and text.strip():
    words = [int(t, 16) for t in re.findall(r"(?:0[xX])?[0-9a-fA-F]+", text)]
    big = next((w for w in words if w >= 1 << 32), None)
    if big is not None: raise CommandError(f"{path}: {big:#x} is not a dword (more than 32 bits)")
    return words
  if len(data) % 4: raise CommandError(f"{path}: {len(data)} bytes is not a whole number of dwords")
  import struct
  return list(struct.unpack(f"<{len(data) // 4}I", data))


def print_packets(packets, out=None) -> None:
  out = out or sys.stdout
  for off, name, fields in packets:
    print(f"{off:6d}  {name:<20} {' '.join(fields)}", file=out)


def _device_rings(spec: str):
  import numpy as np
  from .. import open as open_device, parse_spec
  vendor = parse_spec(spec).vendor
  if vendor == "NV": return _nv_pushbuffers(spec)
  if vendor != "AMD":
    what = {"BNXT": "an RDMA NIC: its queues hold work requests, not command packets (`hcq rdma loopback --mock` shows it "
                    "at work)",
            "CPU": "the host CPU: its kernels are shared objects called directly, with no command ring",
            "QCOM": "an Adreno GPU: decode its CP streams from a file with --qcom FILE"}.get(vendor, f"a {vendor} device")
    raise UsageError(f"--device {spec}: {what}; --device decodes the rings of an AMD (PM4, SDMA) or NV (GPFIFO) device")
  from ..drivers.amd.kernels import demo_code_object
  dev = open_device(spec)
  with dev:
    prog = dev.load(demo_code_object(), "vadd")
    a = dev.alloc(256 * 4)
    dev.copyin(a, np.arange(256, dtype=np.float32))
    prog(a, a, a, 256, global_size=(1,), local_size=(256,))
    dev.synchronize()
    return {"pm4": _ring_words(dev.compute.ring), "sdma": _ring_words(dev.copy.ring)}


def _ring_words(ring) -> tuple[list[int], int]:
  """(the dwords the ring holds, the dwords written since it was made). put_dw counts every dword ever written;
  past the ring's size the ring wrapped and holds only its size's worth (the oldest overwritten)."""
  return list(ring.ring[:min(ring.put_dw, ring.size_dw)]), ring.put_dw


def _nv_pushbuffers(spec: str):
  import numpy as np
  from .. import open as open_device
  from ..drivers.nv.demo import VADD_PTX
  with open_device(spec) as dev:
    prog = dev.load(VADD_PTX, "vadd")
    a = dev.alloc(256 * 4)
    dev.copyin(a, np.arange(256, dtype=np.float32))
    prog(a, a, a, 256, global_size=(1,), local_size=(256,))
    dev.synchronize()
    return {"gpfifo": _ring_words(dev.compute.ring), "gpfifo-copy": _ring_words(dev.copy.ring)}


def _decode_and_print(decode, words) -> int:
  """Print the packets; at a packet that cannot be read, print those before it, then the error (exit status 1)."""
  from ..drivers.amd.decoding import DecodeError as AMDDecodeError
  from ..drivers.nv.gpfifo import DecodeError as NVDecodeError
  from ..drivers.qcom.cp import DecodeError as CPDecodeError
  try: packets = decode(words)
  except (AMDDecodeError, NVDecodeError, CPDecodeError) as e:
    print_packets(e.packets)
    print(f"hcq decode: error: {e}", file=sys.stderr)
    return 1
  print_packets(packets)
  return 0


def run(args) -> int:
  from ..drivers.amd import pm4, sdma
  from ..drivers.nv.gpfifo import decode_pushbuffer
  decoders = {"pm4": pm4.decode, "sdma": sdma.decode, "gpfifo": decode_pushbuffer, "gpfifo-copy": decode_pushbuffer}
  if args.qcom:
    if args.device or args.engine: raise UsageError("--qcom decodes a FILE; it takes neither --device nor --engine")
    if not args.file: raise UsageError("give a FILE (or - for stdin) with --qcom")
    from ..drivers.qcom import cp
    return _decode_and_print(cp.decode, _read_words(args.file))
  if args.device:
    if args.file: raise UsageError("give either a FILE or --device, not both")
    status = 0
    for kind, (words, written) in _device_rings(args.device).items():
      if args.engine and kind.split("-")[0] != args.engine: continue
      what = {"gpfifo": "compute channel pushbuffer", "gpfifo-copy": "copy channel pushbuffer"}.get(kind, f"{kind} ring")
      wrapped = (f"; the ring wrapped: {written} dwords were written, the oldest are overwritten and the first "
                 f"packets may be cut") if written > len(words) else ""
      print(f"== {what} ({len(words)} dwords{wrapped})")
      status |= _decode_and_print(decoders[kind], words)
    return status
  if not args.file: raise UsageError("give a FILE (or - for stdin) or --device SPEC")
  return _decode_and_print(decoders[args.engine or "pm4"], _read_words(args.file))


def register(sub) -> None:
  import argparse
  p = sub.add_parser("decode", help="print PM4/SDMA command streams or NV GPFIFO pushbuffers with their names",
                     description=__doc__.split("\n\n", 1)[1], formatter_class=argparse.RawDescriptionHelpFormatter,
                     epilog="examples: hcq decode ring.bin | hcq decode --engine sdma words.txt | "
                            "hcq decode --device MOCK+AMD | hcq decode --engine gpfifo pb.bin | hcq decode --device MOCK+NV | "
                            "hcq decode --qcom ib.bin")
  p.add_argument("file", nargs="?", help="dword stream: raw little-endian binary or hex text ('-' = stdin)")
  p.add_argument("--engine", choices=("pm4", "sdma", "gpfifo"), default=None,
                 help="packet format: pm4, sdma, or gpfifo (NV pushbuffer methods); default pm4 for files")
  p.add_argument("--device", type=device_spec, default=None, help="run the demo vector add on this device and decode its rings")
  p.add_argument("--qcom", action="store_true", help="the FILE is an Adreno CP stream (type-4/type-7 packets)")
  p.set_defaults(func=run)
