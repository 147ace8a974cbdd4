"""What `hcq rdma` and `hcq rdma gpu` share: the limits and mock addresses, the device-error report, and the JSON-lines
channel between the two ends of a connection (LineReader, the checked FIELDS, Remote: the `hcq rdma serve` child)."""
from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time

MAX_SIZE = 64 << 20        # the largest write hcq rdma offers (and the largest buffer a peer may ask serve for)
MAX_LINE = 64 << 10        # the longest JSON line either end accepts from the other
MOCK_IPS = ("10.0.200.5", "10.0.200.6")      # addresses inside the mock wire only: they never reach a network
SERVE_MOCK_MAC = "020000000002"              # the MAC of the mock NIC `connect --mock` starts for its remote end
MOCK_FLAGS = {"bnxt_mock_pcap": "pcap", "bnxt_mock_faults": "faults", "bnxt_mock_port": "mock_port",
              "bnxt_mock_peer": "mock_peer", "bnxt_mock_mac": "mock_mac"}   # Config field -> flag (args attribute)


def report_device_errors(dev, what: str) -> bool:
  """Print what the device itself recorded about how it was driven (a mock NIC checks its driver; real hardware
  keeps no such record); True when there is nothing."""
  errors = dev.device_errors()
  for e in errors: print(f"hcq rdma {what}: the device reports a driver bug: {e}", file=sys.stderr)
  return not errors


def _ip(args, default: str) -> str:
  from ..errors import ConfigError
  if args.ip: return args.ip
  if args.pci: raise ConfigError("--ip is required with --pci")
  return default


def _first_diff(a: bytes, b: bytes, chunk: int = 1 << 16) -> int:
  """The first offset where a and b differ (compared a chunk at a time, then byte by byte inside the chunk)."""
  n = min(len(a), len(b))
  for start in range(0, n, chunk):
    if a[start:start + chunk] != b[start:start + chunk]:
      return next(i for i in range(start, min(start + chunk, n)) if a[i] != b[i])
  return n


# ---------------------------------------------------------------- the JSON-lines channel to the remote end
class LineReader:
  """JSON objects, one a line, read from a file descriptor with a deadline per line (os.read + select: no buffered
  file object that could hold a line select cannot see). recv returns None at end of file. A line longer than
  max_line is refused (a peer must not make this end buffer without bound); each chunk read is searched once for
  the newline and the line joined once, so reading is linear in what the peer sends."""

  def __init__(self, fd: int, peer: str, timeout: float, max_line: int = MAX_LINE):
    self.fd, self.peer, self.timeout, self.max_line = fd, peer, timeout, max_line
    self.pending = b""   # bytes read past the last complete line

  def recv(self, what: str) -> dict | None:
    from ..errors import DeviceError, Timeout
    deadline = time.monotonic() + self.timeout
    parts, size, chunk = [], 0, self.pending
    self.pending = b""
    while True:
      nl = chunk.find(b"\n")
      parts.append(chunk if nl < 0 else chunk[:nl])
      size += len(parts[-1])
      if size > self.max_line:
        raise DeviceError(f"{self.peer} sent a line of more than {self.max_line} bytes where its {what} was expected")
      if nl >= 0:
        self.pending = chunk[nl + 1:]
        break
      left = deadline - time.monotonic()
      if left <= 0:
        seen = b"".join(parts)[:200].decode(errors="replace")
        raise Timeout(f"{self.peer}'s {what}", last_seen=seen or None, timeout_s=self.timeout)
      ready, _, _ = select.select([self.fd], [], [], left)
      chunk = os.read(self.fd, 1 << 16) if ready else None
      if chunk is None:
        chunk = b""
        continue
      if not chunk:
        head = b"".join(parts)[:200]
        if head.strip(): raise DeviceError(f"{self.peer} closed the channel in the middle of its {what}: {head!r}")
        return None
    line = b"".join(parts)
    try: obj = json.loads(line)
    except ValueError: obj = None
    if not isinstance(obj, dict):
      raise DeviceError(f"{self.peer} sent {line[:200]!r} where its {what} (a JSON object on one line) was expected")
    return obj


def _is_int(v) -> bool: return isinstance(v, int) and not isinstance(v, bool)


def _is_hex(v, n: int) -> bool:
  return isinstance(v, str) and len(v) == n and all(c in "0123456789abcdefABCDEF" for c in v)


# what each field the two ends send each other must be: (test, description)
FIELDS = {
  "qpn": (lambda v: _is_int(v) and 0 <= v <= 0xFFFFFF, "a QP number (0..0xffffff)"),
  "mac": (lambda v: _is_hex(v, 12), "a MAC (12 hex digits)"),
  "gid": (lambda v: _is_hex(v, 32), "a GID (32 hex digits)"),
  "wire": (lambda v: isinstance(v, dict) and all(isinstance(k, str) and isinstance(x, (str, int)) for k, x in v.items()),
           "a wire endpoint (an object of words)"),
  "size": (lambda v: _is_int(v) and 0 < v <= MAX_SIZE, f"a size of 1 .. {MAX_SIZE} bytes (64 MiB)"),
  "addr": (lambda v: _is_int(v) and 0 <= v < 1 << 64, "a 64-bit address"),
  "rkey": (lambda v: _is_int(v) and 0 <= v < 1 << 32, "a 32-bit key"),
  "flag_addr": (lambda v: _is_int(v) and 0 <= v < 1 << 64 and v % 8 == 0, "an 8-byte aligned 64-bit address"),
  "flag_rkey": (lambda v: _is_int(v) and 0 <= v < 1 << 32, "a 32-bit key"),
  "sha256": (lambda v: _is_hex(v, 64), "a SHA-256 digest (64 hex digits)"),
  "head": (lambda v: isinstance(v, str) and len(v) <= 128 and _is_hex(v, len(v)) and len(v) % 2 == 0, "hex bytes"),
}


def field(obj: dict, key: str, peer: str, default=None):
  """obj[key] checked against FIELDS; a DeviceError naming the peer, the field and the value when it is missing or
  wrong (a peer's message decides what this end allocates and where it writes: nothing is taken unchecked)."""
  from ..errors import DeviceError
  if key not in obj:
    if default is not None: return default
    raise DeviceError(f"{peer} sent no {key!r} in {json.dumps(obj)[:200]}")
  test, text = FIELDS[key]
  value = obj[key]
  if not test(value): raise DeviceError(f"{peer} sent {key}={json.dumps(value)[:100]}, which is not {text}")
  return value


class Remote:
  """The remote `hcq rdma serve` as a child process: one JSON object a line each way, every read bounded."""

  def __init__(self, argv: list[str], timeout: float):
    from ..errors import OSCallError
    self.timeout = timeout
    try: self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=None)
    except OSError as e: raise OSCallError("exec", f"the remote command {argv[0]!r}", e.errno) from None
    self.lines = LineReader(self.proc.stdout.fileno(), "the remote end", timeout)

  def send(self, obj) -> None:
    from ..errors import DeviceError
    try:
      self.proc.stdin.write((json.dumps(obj) + "\n").encode())
      self.proc.stdin.flush()
    except BrokenPipeError:
      raise DeviceError(f"the remote end exited (status {self.proc.poll()}) before it read {sorted(obj)}") from None

  def recv(self, what: str) -> dict:
    from ..errors import DeviceError
    obj = self.lines.recv(what)
    if obj is None: raise DeviceError(f"the remote end exited (status {self.proc.poll()}) before sending its {what}")
    if "error" in obj: raise DeviceError(f"the remote end failed: {str(obj['error'])[:500]}")
    return obj

  def close(self) -> int:
    try:
      self.proc.stdin.close()
    except BrokenPipeError:
      pass
    try: return self.proc.wait(timeout=self.timeout)
    except subprocess.TimeoutExpired:
      self.proc.kill()       # our own child, by its pid
      return self.proc.wait(timeout=5)


def _endpoint(dev, qp) -> dict:
  """What one end tells the other: QP number, MAC, GID and the device's wire endpoint (empty on real hardware)."""
  return {"qpn": qp.qpn, "mac": dev.mac.hex(), "gid": dev.gid.hex(), "wire": dev.wire_endpoint()}


def _connect_to(dev, qp, peer: dict, who: str) -> None:
  """Attach the wire to the peer's endpoint and bring qp to RTS towards the peer's QP."""
  dev.wire_connect({k: str(v) for k, v in field(peer, "wire", who, default={}).items()})
  qp.connect(field(peer, "qpn", who), bytes.fromhex(field(peer, "gid", who)), bytes.fromhex(field(peer, "mac", who)))


def accept_request(dev, qp, lines, reply, who: str) -> int | None:
  """The serving end's handshake: the peer's QP number, MAC and GID (qp brought to RTS towards it), ours sent back,
  then the buffer request; returns its size, checked before anything is allocated (1 B .. 64 MiB), or None when the
  peer hung up first."""
  peer = lines.recv("QP number, MAC and GID")
  if peer is None: return None
  _connect_to(dev, qp, peer, who)
  reply(_endpoint(dev, qp))
  ask = lines.recv("buffer request")
  if ask is None: return None
  return field(ask, "size", who)
