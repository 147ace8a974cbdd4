"""A pcap (libpcap 2.4, LINKTYPE_ETHERNET) writer and reader for the mock wire.

Format: https://www.tcpdump.org/manpages/pcap-savefile.5.txt (24-byte global header, 16-byte record headers, little-endian
here, magic 0xa1b2c3d4 for microsecond timestamps).
"""
from __future__ import annotations

import struct
import threading
import time

from ...errors import OSCallError

PCAP_MAGIC_US = 0xA1B2C3D4
LINKTYPE_ETHERNET = 1
SNAPLEN = 65535


class PcapWriter:
  """Appends frames to a pcap file; safe to call from the NIC's TX path and its RX thread at once."""

  def __init__(self, path: str):
    self.path = path
    self._lock = threading.Lock()
    try: self._file = open(path, "wb")
    except OSError as e:   # a missing folder, no permission, a directory: name the file, not a traceback
      raise OSCallError("open", f"pcap file {path}", e.errno) from None
    self._file.write(struct.pack("<IHHiIII", PCAP_MAGIC_US, 2, 4, 0, 0, SNAPLEN, LINKTYPE_ETHERNET))
    self._file.flush()
    self.count = 0

  def write(self, frame: bytes, timestamp: float | None = None) -> None:
    ts = time.time() if timestamp is None else timestamp
    sec, usec = int(ts), int((ts - int(ts)) * 1e6)
    with self._lock:
      if self._file.closed: return
      self._file.write(struct.pack("<IIII", sec, usec, min(len(frame), SNAPLEN), len(frame)) + frame[:SNAPLEN])
      self._file.flush()
      self.count += 1

  def close(self) -> None:
    with self._lock: self._file.close()


def read_pcap(path: str) -> list[bytes]:
  """Every frame of a pcap file written by PcapWriter (or any little-endian microsecond pcap)."""
  with open(path, "rb") as f: data = f.read()
  magic, _maj, _min, _tz, _sig, _snap, linktype = struct.unpack("<IHHiIII", data[:24])
  if magic != PCAP_MAGIC_US: raise ValueError(f"{path}: not a little-endian microsecond pcap (magic {magic:#x})")
  if linktype != LINKTYPE_ETHERNET: raise ValueError(f"{path}: link type {linktype}, expected Ethernet")
  frames, off = [], 24
  while off + 16 <= len(data):
    _s, _u, incl, _orig = struct.unpack("<IIII", data[off:off + 16])
    frames.append(data[off + 16:off + 16 + incl])
    off += 16 + incl
  return frames
