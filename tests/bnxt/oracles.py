"""External oracles for RoCEv2 frames: Debian's tshark (header layout, opcodes) and scapy (an independent ICRC)."""
from __future__ import annotations

import os
import shutil
import subprocess

TSHARK_FIELDS = ["frame.number", "ip.src", "ip.dst", "udp.dstport", "infiniband.bth.opcode", "infiniband.bth.padcnt",
                 "infiniband.bth.destqp", "infiniband.bth.a", "infiniband.bth.psn", "infiniband.reth.va",
                 "infiniband.reth.r_key", "infiniband.reth.dmalen", "infiniband.aeth.syndrome", "infiniband.aeth.msn",
                 "infiniband.invariant.crc"]
SYSTEM_PYTHON = "/usr/bin/python3"


def tshark_rows(pcap: str) -> list[dict]:
  """One dict per frame: the fields above as tshark prints them (ints parsed, hex included)."""
  cmd = ["tshark", "-r", pcap, "-T", "fields", "-E", "separator=|", "-d", "udp.port==4791,infiniband"]
  for f in TSHARK_FIELDS: cmd += ["-e", f]
  out = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=True).stdout
  rows = []
  for line in out.splitlines():
    values = line.split("|")
    row = {}
    for name, v in zip(TSHARK_FIELDS, values):
      key = name.split(".", 1)[1] if name.startswith("infiniband.") else name
      if v == "": row[key] = None
      elif name in ("ip.src", "ip.dst"): row[key] = v
      else: row[key] = int(v, 0)
    rows.append(row)
  return rows


def scapy_available() -> bool:
  if not os.path.exists(SYSTEM_PYTHON): return False
  r = subprocess.run([SYSTEM_PYTHON, "-c", "import scapy.contrib.roce"], capture_output=True, timeout=60)
  return r.returncode == 0


_SCAPY_SCRIPT = """
import sys
from scapy.layers.l2 import Ether
from scapy.contrib.roce import BTH
for line in sys.stdin:
  frame = bytes.fromhex(line.strip())
  pkt = Ether(frame)
  bth = pkt[BTH]
  print(bth.compute_icrc(bytes(bth)).hex(), frame[-4:].hex())
"""


def scapy_icrc(frames: list[bytes]) -> list[tuple[str, str]]:
  """(scapy's ICRC, the frame's ICRC bytes) as hex, per frame."""
  inp = "".join(f.hex() + "\n" for f in frames)
  out = subprocess.run([SYSTEM_PYTHON, "-c", _SCAPY_SCRIPT], input=inp, capture_output=True, text=True, timeout=120,
                       check=True).stdout
  return [tuple(line.split()) for line in out.splitlines()]


def have_tshark() -> bool:
  return shutil.which("tshark") is not None
