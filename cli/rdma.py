"""`hcq rdma`: RDMA WRITE with a Broadcom Thor2 driven from userspace.

  hcq rdma loopback [--pci BUS | --mock] [--size N] [--pmtu 1024|4096] [--pcap FILE]
      two QPs on one port, PHY loopback on, one write, the bytes compared
  hcq rdma connect  [--pci BUS --remote-cmd "ssh host hcq rdma serve --pci BUS" | --mock] [--size N] [--pcap FILE]
      this host writes into the memory of a remote `hcq rdma serve`; the two ends exchange JSON lines over the
      remote's stdin/stdout: {qpn, mac, gid} both ways (plus udp_port, the port each mock PHY bound, with --mock),
      then {size} -> {addr, rkey}, then {done} -> {sha256, head}
  hcq rdma serve    [--pci BUS | --mock]
      the remote end (reads requests on stdin, answers on stdout)

--mock runs the mock Thor2; `connect --mock` starts `serve --mock` as a second local process, the two mock NICs
exchanging frames over UDP on 127.0.0.1 (and never any other address). Each mock PHY binds port 0 and the handshake
carries the port it got, so no port is picked before it is bound. Every wait is bounded by --timeout.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import select
import shlex
import subprocess
import sys
import time

MOCK_IPS = ("10.0.200.5", "10.0.200.6")      # addresses inside the mock wire only: they never reach a network
LOCALHOST = "127.0.0.1"


def register(sub) -> None:
  p = sub.add_parser("rdma", help="RDMA WRITE over RoCEv2 with a Broadcom Thor2 (or the mock one)")
  rsub = p.add_subparsers(dest="rdma_command", metavar="MODE", required=True)
  for name, fn, text in (("loopback", run_loopback, "write through PHY loopback on one port"),
                         ("connect", run_connect, "write into a remote `hcq rdma serve`"),
                         ("serve", run_serve, "the remote end of connect (JSON lines on stdin/stdout)")):
    q = rsub.add_parser(name, help=text)
    where = q.add_mutually_exclusive_group()
    where.add_argument("--pci", metavar="BUS", help="PCI address of the Thor2 function, e.g. 0000:41:00.0")
    where.add_argument("--mock", action="store_true", help="use the mock Thor2 (the default without --pci)")
    q.add_argument("--ip", help="IPv4 address of this end (its GID); the mock uses 10.0.200.5/.6")
    q.add_argument("--pmtu", type=int, default=1024, choices=(256, 512, 1024, 2048, 4096))
    q.add_argument("--timeout", type=float, default=30.0, help="seconds any one step may take")
    q.add_argument("--pcap", metavar="FILE", help="record this end's wire (mock only)")
    q.add_argument("--faults", metavar="SPEC", help="wire faults on this end, e.g. drop=3,corrupt=1 (mock only)")
    if name != "serve":
      q.add_argument("--size", type=_size, default=4096, help="bytes to write (suffixes K, M)")
      q.add_argument("--seed", type=int, default=1, help="seed of the message bytes")
    if name == "connect":
      q.add_argument("--remote-cmd", metavar="CMD", help="command that runs `hcq rdma serve` on the remote host")
      q.add_argument("--remote-ip", help="the remote end's IPv4 address (its GID)")
    if name == "serve":
      q.add_argument("--mock-port", type=int, default=0, help=argparse.SUPPRESS)
      q.add_argument("--mock-peer", type=int, default=0, help=argparse.SUPPRESS)
      q.add_argument("--mock-mac", default="", help=argparse.SUPPRESS)
    q.set_defaults(func=fn)


def _size(text: str) -> int:
  mult = {"K": 1 << 10, "M": 1 << 20}.get(text[-1:].upper(), 1)
  try: value = int(text[:-1] if mult > 1 else text, 0) * mult
  except ValueError: raise argparse.ArgumentTypeError(f"{text!r} is not a size (e.g. 25, 4K, 1M)") from None
  if not 0 < value <= 64 << 20: raise argparse.ArgumentTypeError(f"size {text} is outside 1 B .. 64 MiB")
  return value


def message(size: int, seed: int) -> bytes:
  """Deterministic bytes that differ at every offset pattern (so misplaced packets show)."""
  out, counter = bytearray(), 0
  while len(out) < size:
    out += hashlib.sha256(f"{seed}:{counter}".encode()).digest()
    counter += 1
  return bytes(out[:size])


# ---------------------------------------------------------------- opening a device
def open_nic(args, mock_port: int = 0, mock_peer: int = 0, mock_mac: str = ""):
  from .. import open as hcq_open
  from ..config import from_env
  cfg = from_env().replace(timeout_s=args.timeout)
  if args.pci:
    if args.pcap or args.faults: raise SystemExit("hcq rdma: --pcap and --faults need the mock wire (--mock)")
    from ..drivers.bnxt import open_pci
    from ..drivers.system import LinuxOS
    return open_pci(LinuxOS(cfg), cfg, args.pci)
  cfg = cfg.replace(bnxt_mock_port=mock_port, bnxt_mock_peer=mock_peer, bnxt_mock_pcap=args.pcap or "",
                    bnxt_mock_faults=args.faults or "", bnxt_mock_mac=mock_mac)
  return hcq_open("MOCK+BNXT", config=cfg)


def mock_errors(dev) -> list[str]:
  """Driver bugs the mock NIC recorded (none on real hardware): read from the mock OS's device models."""
  return [e for d in getattr(dev.os, "devices", []) for e in getattr(d, "errors", [])]


def report_mock_errors(dev, what: str) -> bool:
  errors = mock_errors(dev)
  for e in errors: print(f"hcq rdma {what}: the mock NIC reports a driver bug: {e}", file=sys.stderr)
  return not errors


def _ip(args, default: str) -> str:
  if args.ip: return args.ip
  if args.pci: raise SystemExit("hcq rdma: --ip is required with --pci")
  return default


# ---------------------------------------------------------------- loopback
def run_loopback(args) -> int:
  from ..drivers.bnxt import BNXTQP
  dev = open_nic(args)
  try:
    dev.set_ip(_ip(args, MOCK_IPS[0]))
    a, b = BNXTQP(dev, pmtu=args.pmtu), BNXTQP(dev, pmtu=args.pmtu)
    a.connect(b.qpn, dev.gid, dev.mac)
    b.connect(a.qpn, dev.gid, dev.mac)
    dev.set_loopback(True, settle_s=0.0 if not args.pci else 1.0)
    try:
      src, dst = dev.alloc(args.size), dev.alloc(args.size)
      lkey, rkey = dev.register_mr(src), dev.register_mr(dst)
      data = message(args.size, args.seed)
      src.write(0, data)
      t0 = time.perf_counter()
      a.rdma_write(dst.va, rkey, src.va, lkey, args.size, timeout_s=args.timeout)
      dt = time.perf_counter() - t0
      got = dst.read(0, args.size)
    finally:
      dev.set_loopback(False)
    ok = got == data
    print(f"loopback: QP {a.qpn:#x} -> QP {b.qpn:#x}, {args.size} bytes at PMTU {args.pmtu} "
          f"({max(1, -(-args.size // args.pmtu))} packets) in {dt * 1e3:.2f} ms: {'verified' if ok else 'MISMATCH'}")
    if not ok: print(f"  first difference at byte {_first_diff(got, data)}", file=sys.stderr)
    return 0 if report_mock_errors(dev, "loopback") and ok else 1
  finally:
    dev.close()   # and the mock OS hcq.open made for it (its NIC threads and sockets)


def _first_diff(a: bytes, b: bytes) -> int:
  return next((i for i in range(min(len(a), len(b))) if a[i] != b[i]), min(len(a), len(b)))


# ---------------------------------------------------------------- the JSON-lines channel to the remote end
class LineReader:
  """JSON objects, one a line, read from a file descriptor with a deadline per line (os.read + select: no buffered
  file object that could hold a line select cannot see). recv returns None at end of file."""

  def __init__(self, fd: int, peer: str, timeout: float):
    self.fd, self.peer, self.timeout = fd, peer, timeout
    self.pending = b""   # bytes read past the last complete line

  def recv(self, what: str) -> dict | None:
    from ..errors import DeviceError, Timeout
    deadline = time.monotonic() + self.timeout
    line = self.pending
    while b"\n" not in line:
      left = deadline - time.monotonic()
      if left <= 0: raise Timeout(f"{self.peer}'s {what}", last_seen=line.decode(errors="replace") or None,
                                  timeout_s=self.timeout)
      ready, _, _ = select.select([self.fd], [], [], left)
      if not ready: continue
      chunk = os.read(self.fd, 1 << 16)
      if not chunk:
        if line.strip(): raise DeviceError(f"{self.peer} closed the channel in the middle of its {what}: {line[:200]!r}")
        self.pending = b""
        return None
      line += chunk
    line, _, self.pending = line.partition(b"\n")
    try: return json.loads(line)
    except ValueError:
      raise DeviceError(f"{self.peer} sent {line[:200]!r} where its {what} (a JSON line) was expected") from None


class Remote:
  """The remote `hcq rdma serve` as a child process: one JSON object a line each way, every read bounded."""

  def __init__(self, argv: list[str], timeout: float):
    self.timeout = timeout
    self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=None)
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
    if "error" in obj: raise DeviceError(f"the remote end failed: {obj['error']}")
    return obj

  def close(self) -> int:
    try:
      self.proc.stdin.close()
      return self.proc.wait(timeout=self.timeout)
    except subprocess.TimeoutExpired:
      self.proc.kill()       # our own child, by its pid
      return self.proc.wait(timeout=5)


def _mock_phy(dev):
  """The mock NIC's PHY (its UDP socket on 127.0.0.1) behind dev; None on real hardware."""
  phys = [d.phy for d in getattr(dev.os, "devices", []) if hasattr(d, "phy")]
  return phys[-1] if phys else None


def _endpoint(dev, qp) -> dict:
  """What one end tells the other: QP number, MAC, GID and, on the mock wire, the UDP port its PHY is bound to (each
  end binds port 0 itself and reports the port it got: no port is chosen and then bound by someone else)."""
  ep = {"qpn": qp.qpn, "mac": dev.mac.hex(), "gid": dev.gid.hex()}
  phy = _mock_phy(dev)
  if phy is not None: ep["udp_port"] = phy.address[1]
  return ep


def _connect_mock_wire(dev, peer: dict) -> None:
  """Point this end's mock PHY at the peer's UDP port (from the handshake)."""
  phy = _mock_phy(dev)
  if phy is None: return
  if "udp_port" not in peer: raise ValueError(f"the remote end did not report its mock UDP port: {peer}")
  phy.set_peer(int(peer["udp_port"]))


# ---------------------------------------------------------------- connect (this end writes)
def run_connect(args) -> int:
  from ..drivers.bnxt import BNXTQP
  if args.pci and not args.remote_cmd: raise SystemExit("hcq rdma connect --pci needs --remote-cmd")
  if args.pci:
    argv = shlex.split(args.remote_cmd)
  else:   # both mock PHYs bind port 0; the handshake carries the ports they got
    argv = [sys.executable, "-c", "import sys; from hcq.cli import main; sys.exit(main(sys.argv[1:]))",
            "rdma", "serve", "--mock", "--pmtu", str(args.pmtu), "--timeout", str(args.timeout),
            "--ip", args.remote_ip or MOCK_IPS[1], "--mock-mac", "020000000002"]
  dev = open_nic(args, mock_mac="020000000001")
  remote = Remote(argv, args.timeout)
  status = 1
  try:
    dev.set_ip(_ip(args, MOCK_IPS[0]))
    qp = BNXTQP(dev, pmtu=args.pmtu)
    remote.send(_endpoint(dev, qp))
    peer = remote.recv("QP number, MAC and GID")
    _connect_mock_wire(dev, peer)
    qp.connect(int(peer["qpn"]), bytes.fromhex(peer["gid"]), bytes.fromhex(peer["mac"]))
    remote.send({"size": args.size})
    target = remote.recv("target address and rkey")
    src = dev.alloc(args.size)
    lkey = dev.register_mr(src)
    data = message(args.size, args.seed)
    src.write(0, data)
    t0 = time.perf_counter()
    qp.rdma_write(int(target["addr"]), int(target["rkey"]), src.va, lkey, args.size, timeout_s=args.timeout)
    dt = time.perf_counter() - t0
    remote.send({"done": True})
    seen = remote.recv("digest of the received bytes")
    ok = seen["sha256"] == hashlib.sha256(data).hexdigest() and bytes.fromhex(seen["head"]) == data[:64]
    print(f"connect: QP {qp.qpn:#x} -> remote QP {int(peer['qpn']):#x}, {args.size} bytes at PMTU {args.pmtu} into "
          f"{int(target['addr']):#x} (rkey {int(target['rkey']):#x}) in {dt * 1e3:.2f} ms: "
          f"{'verified by the remote end' if ok else 'MISMATCH'}")
    status = 0 if report_mock_errors(dev, "connect") and ok else 1
  finally:
    rc = remote.close()
    dev.close()
  if rc != 0:
    print(f"hcq rdma connect: the remote end exited with status {rc}", file=sys.stderr)
    return 1
  return status


# ---------------------------------------------------------------- serve (the remote end)
def run_serve(args) -> int:
  from ..drivers.bnxt import BNXTQP
  out = sys.stdout

  def reply(obj) -> None:
    out.write(json.dumps(obj) + "\n")
    out.flush()

  lines = LineReader(sys.stdin.fileno(), "the connecting end", args.timeout)

  def request(what: str) -> dict | None:
    return lines.recv(what)

  dev = None
  try:
    dev = open_nic(args, mock_port=args.mock_port, mock_peer=args.mock_peer, mock_mac=args.mock_mac)
    dev.set_ip(_ip(args, MOCK_IPS[1]))
    qp = BNXTQP(dev, pmtu=args.pmtu)
    peer = request("QP number, MAC and GID")
    if peer is None: return 0
    if not args.mock_peer: _connect_mock_wire(dev, peer)
    qp.connect(int(peer["qpn"]), bytes.fromhex(peer["gid"]), bytes.fromhex(peer["mac"]))
    reply(_endpoint(dev, qp))
    ask = request("buffer request")
    if ask is None: return 0
    target = dev.alloc(int(ask["size"]))
    rkey = dev.register_mr(target)
    reply({"addr": target.va, "rkey": rkey, "size": int(ask["size"])})
    done = request("completion notice")
    if done is None: return 0
    got = target.read(0, int(ask["size"]))
    reply({"sha256": hashlib.sha256(got).hexdigest(), "head": got[:64].hex()})
    print(f"serve: received {len(got)} bytes in QP {qp.qpn:#x}", file=sys.stderr)
    return 0 if report_mock_errors(dev, "serve") else 1
  except Exception as e:   # the connecting end prints it
    reply({"error": f"{type(e).__name__}: {e}"})
    return 1
  finally:
    if dev is not None: dev.close()
