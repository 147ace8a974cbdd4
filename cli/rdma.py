"""`hcq rdma`: RDMA WRITE with a Broadcom Thor2 driven from userspace.

  hcq rdma loopback [--pci BUS | --mock] [--size N] [--pmtu 1024|4096] [--pcap FILE] [--iters N] [--sweep] [--json]
      two QPs on one port, PHY loopback on, one write (--iters N: N per size, --sweep: 2 B .. 64 MiB by powers of 2),
      the bytes compared; with --iters or --sweep a perftest-style table (bytes, iterations, Gb/s, Mpps, latency
      min/avg/p99 in microseconds, timed on the host around each post and its completion)
  hcq rdma devinfo  [--pci BUS | --mock] [--json]
      as ibv_devinfo: firmware version, port, link state, MTU, GID, MAC
  hcq rdma connect  [--pci BUS --remote-cmd "ssh host hcq rdma serve --pci BUS" | --mock] [--size N] [--pcap FILE]
                    [--iters N] [--json]
      this host writes into the memory of a remote `hcq rdma serve`; the two ends exchange JSON lines over the
      remote's stdin/stdout: {qpn, mac, gid, wire} both ways, then {size} -> {addr, rkey}, then {done} ->
      {sha256, head}
  hcq rdma serve    [--pci BUS | --mock]
      the remote end (reads requests on stdin, answers on stdout)

--mock runs the mock Thor2; `connect --mock` starts `serve --mock` as a second local process, the two mock NICs
exchanging frames over UDP on 127.0.0.1 (and never any other address). `wire` in the handshake is the device's own
account of where its end of the wire is (BNXTDev.wire_endpoint: empty on real hardware; a mock port reports the
UDP port it bound, so no port is picked before it is bound) and is handed to the other device as is. Every wait is
bounded by --timeout; the largest write, and the largest buffer a peer may ask `serve` for, is 64 MiB.

The mock options --pcap, --faults, --mock-port, --mock-peer and --mock-mac default to HCQ_BNXT_MOCK_PCAP, _FAULTS,
_PORT, _PEER and _MAC (read by config.py); with `connect --mock` they apply to this end, and the `serve` it starts
gets its own explicit values. Exit status: 0 verified, 1 failed, 2 a usage error (a bad flag, value or variable).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import select
import shlex
import subprocess
import sys
import time

from .rdma_channel import (MAX_LINE, MAX_SIZE, MOCK_FLAGS, MOCK_IPS, SERVE_MOCK_MAC, LineReader, Remote,  # noqa: F401
                           _connect_to, _endpoint, _first_diff, _ip, accept_request, field, report_device_errors)


def register(sub) -> None:
  p = sub.add_parser("rdma", help="RDMA WRITE over RoCEv2 with a Broadcom Thor2 (or the mock one)")
  rsub = p.add_subparsers(dest="rdma_command", metavar="MODE", required=True)
  for name, fn, text in (("devinfo", run_devinfo, "the device and its port, as ibv_devinfo prints them"),
                         ("loopback", run_loopback, "write through PHY loopback on one port"),
                         ("connect", run_connect, "write into a remote `hcq rdma serve`"),
                         ("serve", run_serve, "the remote end of connect (JSON lines on stdin/stdout)"),
                         ("gpu", _run_gpu, "a GPU queue posts the RDMA WRITE: kernel -> NIC -> remote kernel (rdma_gpu.py)")):
    q = rsub.add_parser(name, help=text)
    where = q.add_mutually_exclusive_group()
    where.add_argument("--pci", metavar="BUS", help="PCI address of the Thor2 function, e.g. 0000:41:00.0")
    where.add_argument("--mock", action="store_true", help="use the mock Thor2 (the default without --pci)")
    q.add_argument("--ip", type=_ipv4, help="IPv4 address of this end (its GID); the mock uses 10.0.200.5/.6")
    q.add_argument("--pmtu", type=int, default=1024, choices=(256, 512, 1024, 2048, 4096))
    q.add_argument("--timeout", type=_seconds, default=30.0, help="seconds any one step may take")
    mock = q.add_argument_group("mock wire (defaults: HCQ_BNXT_MOCK_PCAP, _FAULTS, _PORT, _PEER, _MAC)")
    mock.add_argument("--pcap", metavar="FILE", type=_pcap_path, help="record this end's wire ('' = none)")
    mock.add_argument("--faults", metavar="SPEC", type=_faults,
                      help="wire faults on this end, e.g. drop=3,corrupt=1+4,reorder=2,p_drop=0.01,seed=7 ('' = none)")
    mock.add_argument("--mock-port", metavar="PORT", type=_udp_port, help="UDP port the mock PHY binds (0 = any)")
    mock.add_argument("--mock-peer", metavar="PORT", type=_udp_port, help="UDP port of the peer mock PHY (0 = none)")
    mock.add_argument("--mock-mac", metavar="HEX12", type=_mac, help="the mock NIC's MAC, 12 hex digits")
    if name == "devinfo":
      q.add_argument("--json", action="store_true", help="print one JSON document")
      q.set_defaults(func=fn)
      continue
    if name != "serve":
      q.add_argument("--size", type=_size, default=None,
                     help="bytes to write (suffixes K, M; at most 64M; default 4K; with --sweep the largest size)")
      q.add_argument("--seed", type=int, default=1, help="seed of the message bytes")
    if name == "loopback":
      q.add_argument("--iters", type=_iters, default=None, metavar="N",
                     help="write each size N times and print perftest's table (bytes, iterations, Gb/s, Mpps, "
                          "latency min/avg/p99)")
      q.add_argument("--sweep", action="store_true", help="every size from 2 B to 64 MiB (or --size) by powers of 2, "
                                                          "as ib_write_bw -a")
      q.add_argument("--json", action="store_true", help="print the table's rows as one JSON document")
    if name == "connect":
      q.add_argument("--iters", type=_iters, default=None, metavar="N",
                     help="write N times (the remote end checks the last) and print perftest's table")
      q.add_argument("--json", action="store_true", help="print the table's row as one JSON document")
    if name == "gpu":
      q.add_argument("--connect", action="store_true", help="to a remote `hcq rdma serve --gpu` (default: loopback)")
      q.add_argument("--remote-gpu-iface", choices=("KFD", "PCI", "RM"),
                     help="with --connect --mock: how the remote end drives its GPU (default: as this end)")
    if name == "serve":
      q.add_argument("--gpu", action="store_true", help="the remote end of `hcq rdma gpu --connect`")
    if name in ("gpu", "serve"):
      q.add_argument("--gpu-iface", choices=("KFD", "PCI", "RM"), default="KFD",
                     help="how the GPUs are driven: KFD (default), PCI (AM; the mock: MOCKPCI+AMD) or RM (NVIDIA "
                          "through nvidia.ko; the mock: MOCK+NV)")
    if name in ("connect", "gpu"):
      q.add_argument("--remote-cmd", metavar="CMD", help="command that runs `hcq rdma serve` on the remote host")
      q.add_argument("--remote-ip", type=_ipv4, help="the remote end's IPv4 address (its GID)")
    q.set_defaults(func=fn)


def _run_gpu(args) -> int:
  from .rdma_gpu import run_gpu
  return run_gpu(args)


# ---------------------------------------------------------------- flag values (argparse types: a bad one exits 2)
def _size(text: str) -> int:
  mult = {"K": 1 << 10, "M": 1 << 20}.get(text[-1:].upper(), 1)
  try: value = int(text[:-1] if mult > 1 else text, 0) * mult
  except ValueError: raise argparse.ArgumentTypeError(f"{text!r} is not a size (e.g. 25, 4K, 1M)") from None
  if not 0 < value <= MAX_SIZE: raise argparse.ArgumentTypeError(f"size {text} is outside 1 B .. 64 MiB")
  return value


def _iters(text: str) -> int:
  try: value = int(text, 0)
  except ValueError: raise argparse.ArgumentTypeError(f"{text!r} is not a number of iterations") from None
  if not 1 <= value <= 1_000_000: raise argparse.ArgumentTypeError(f"--iters {text}: must be 1 .. 1000000")
  return value


def _seconds(text: str) -> float:
  try: value = float(text)
  except ValueError: value = math.nan
  if not (math.isfinite(value) and value > 0): raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds > 0")
  return value


def _ipv4(text: str) -> str:
  import ipaddress
  try: return str(ipaddress.IPv4Address(text))
  except ValueError: raise argparse.ArgumentTypeError(f"{text!r} is not an IPv4 address") from None


def _checked(check, text, convert=str):
  """Run one of config.py's checks on a flag's value (the same checks its environment variable gets)."""
  try: value = convert(text)
  except ValueError: raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
  try: check(value)
  except ValueError as e: raise argparse.ArgumentTypeError(str(e)) from None
  return value


def _faults(text: str) -> str:
  from ..config import check_faults
  return _checked(check_faults, text)


def _udp_port(text: str) -> int:
  from ..config import check_udp_port
  return _checked(check_udp_port, text, lambda t: int(t, 0))


def _mac(text: str) -> str:
  from ..config import check_mac
  return _checked(check_mac, text)


def check_pcap_path(path: str) -> None:
  """A pcap file can be created at path: tried by opening it for appending (what permission bits alone cannot
  tell, e.g. for root or on /proc); a file this made is removed again."""
  if not path: return
  folder = os.path.dirname(os.path.abspath(path))
  if not os.path.isdir(folder): raise ValueError(f"cannot write {path!r}: the folder {folder} does not exist")
  if os.path.isdir(path): raise ValueError(f"cannot write {path!r}: it is a folder")
  existed = os.path.exists(path)
  try: open(path, "ab").close()
  except OSError as e: raise ValueError(f"cannot write {path!r}: {e.strerror}") from None
  if not existed: os.remove(path)


def _pcap_path(text: str) -> str:
  return _checked(check_pcap_path, text)


def message(size: int, seed: int) -> bytes:
  """Deterministic pseudo-random bytes (SHAKE-128 of the seed: made in one call, linear in size), so a misplaced
  packet shows as a mismatch."""
  return hashlib.shake_128(f"hcq rdma message {seed}".encode()).digest(size)


# ---------------------------------------------------------------- opening a device


def open_nic(args):
  """The Thor2 at --pci, or a mock one whose options are the flags, else HCQ_BNXT_MOCK_* (config.py)."""
  from .. import open as hcq_open
  from ..config import from_env
  from ..errors import ConfigError
  cfg = from_env().replace(timeout_s=args.timeout)
  given = {k: getattr(args, flag) for k, flag in MOCK_FLAGS.items() if getattr(args, flag) is not None}
  if args.pci:
    used = [f"--{MOCK_FLAGS[k].replace('_', '-')}" for k, v in given.items() if v]
    if used: raise ConfigError(f"{', '.join(used)}: only for the mock wire (--mock), not with --pci")
    from ..drivers.bnxt import open_pci
    from ..drivers.system import LinuxOS
    return open_pci(LinuxOS(cfg), cfg, args.pci)
  if "bnxt_mock_pcap" not in given and cfg.bnxt_mock_pcap:   # from the environment: checked as the flag would be
    try: check_pcap_path(cfg.bnxt_mock_pcap)
    except ValueError as e: raise ConfigError(f"environment variable HCQ_BNXT_MOCK_PCAP: {e}") from None
  return hcq_open("MOCK+BNXT", config=cfg.replace(**given))


# ---------------------------------------------------------------- devinfo
# IB MTUs (include/rdma/ib_verbs.h enum ib_mtu) and what RoCE takes off a netdev MTU for its headers: GRH 40, UDP 8,
# BTH 12, XRC 4, AtomicETH 28, ICRC 4 (include/rdma/ib_addr.h iboe_get_mtu)
IB_MTUS = (4096, 2048, 1024, 512, 256)
ROCE_HEADERS = 40 + 8 + 12 + 4 + 28 + 4
# the L2 frame the driver's vnic takes (drivers/bnxt/device.py _l2_path: mru 9018) less Ethernet header, VLAN tag and
# FCS (bnxt.c: mru = mtu + ETH_HLEN + VLAN_HLEN): a 9000-byte MTU
L2_MTU = 9018 - 14 - 4
LINK_STATES = {0: "PORT_DOWN", 1: "PORT_INIT", 2: "PORT_ACTIVE"}   # hwrm_port_phy_qcfg_output.link: no link, signal, link


def iboe_mtu(netdev_mtu: int) -> int:
  """The active RoCE MTU of a netdev MTU, as Linux's iboe_get_mtu (bnxt_re_query_port's active_mtu)."""
  left = netdev_mtu - ROCE_HEADERS
  return next((m for m in IB_MTUS if left >= m), 0)


def run_devinfo(args) -> int:
  dev = open_nic(args)
  try:
    ip = args.ip or (None if args.pci else MOCK_IPS[0])
    gids = []
    if ip:
      index = dev.set_ip(ip)
      gids.append({"index": index, "gid": _gid_text(dev.gid), "ip": ip, "type": "RoCE v2"})
    phy = dev.hwrm.call("port_phy_qcfg", port_id=dev.port_id)
    speed_gbps = phy.link_speed / 10 if phy.link_speed not in (0, 0xFFFF) else (0.01 if phy.link_speed == 0xFFFF else 0)
    info = {"hca_id": dev.name, "transport": "InfiniBand (RoCE v2)", "fw_ver": ".".join(map(str, dev.fw_version)),
            "chip": f"{dev.chip_num:#06x}", "node_guid": _guid(dev.mac), "mac": ":".join(f"{b:02x}" for b in dev.mac),
            "ports": [{"port": dev.port_id + 1, "state": LINK_STATES.get(phy.link, f"unknown ({phy.link})"),
                       "link_speed_gbps": speed_gbps, "max_mtu": IB_MTUS[0], "active_mtu": iboe_mtu(L2_MTU),
                       "link_layer": "Ethernet", "loopback": bool(phy.lpbk), "gids": gids}]}
    clean = report_device_errors(dev, "devinfo")
  finally:
    dev.close()
  if args.json:
    print(json.dumps(info, indent=1))
    return 0 if clean else 1
  print(f"hca_id:\t{info['hca_id']}")
  for k in ("transport", "fw_ver", "chip", "node_guid", "mac"): print(f"\t{k + ':':<16}{info[k]}")
  for p in info["ports"]:
    print(f"\t\tport:\t{p['port']}")
    print(f"\t\t\t{'state:':<16}{p['state']}")
    print(f"\t\t\t{'link_speed:':<16}{p['link_speed_gbps']:g} Gb/s")
    print(f"\t\t\t{'max_mtu:':<16}{p['max_mtu']}")
    print(f"\t\t\t{'active_mtu:':<16}{p['active_mtu']}")
    print(f"\t\t\t{'link_layer:':<16}{p['link_layer']}")
    for g in p["gids"]: print(f"\t\t\tGID[{g['index']:>3}]:\t{g['gid']}, {g['type']} ({g['ip']})")
    if not p["gids"]: print("\t\t\tGID:\t\tnone (give --ip to add this end's IPv4 GID)")
  return 0 if clean else 1


def _gid_text(gid: bytes) -> str:
  return ":".join(gid[i:i + 2].hex() for i in range(0, 16, 2))


def _guid(mac: bytes) -> str:
  """The node GUID RoCE devices derive from the MAC (EUI-64: ff:fe in the middle, the U/L bit flipped), as
  ibv_devinfo shows it: four groups of four hex digits."""
  eui = bytes([mac[0] ^ 2]) + mac[1:3] + b"\xff\xfe" + mac[3:6]
  return ":".join(eui[i:i + 2].hex() for i in range(0, 8, 2))


# ---------------------------------------------------------------- loopback
def run_loopback(args) -> int:
  from ..drivers.bnxt import BNXTQP
  from ..drivers.hcq import trace
  from . import _rdmaperf as perf
  table = args.iters is not None or args.sweep or args.json
  sizes = perf.sweep_sizes(args.size or MAX_SIZE) if args.sweep else [args.size or 4096]
  iters = args.iters or 1
  ip = _ip(args, MOCK_IPS[0])
  dev = open_nic(args)
  try:
    dev.set_ip(ip)
    a, b = BNXTQP(dev, pmtu=args.pmtu), BNXTQP(dev, pmtu=args.pmtu)
    a.connect(b.qpn, dev.gid, dev.mac)
    b.connect(a.qpn, dev.gid, dev.mac)
    dev.set_loopback(True, settle_s=0.0 if not args.pci else 1.0)
    rows, bad, tracer = [], None, None
    try:
      largest = max(sizes)
      src, dst = dev.alloc(largest), dev.alloc(largest)
      lkey, rkey = dev.register_mr(src), dev.register_mr(dst)
      data = message(largest, args.seed)
      src.write(0, data)
      tracer = trace.for_device(dev, dev.config)   # HCQ_TRACE: each write on the NIC's track
      def write(size):
        t0 = trace.now_us()
        a.rdma_write(dst.va, rkey, src.va, lkey, size, timeout_s=args.timeout)
        if tracer is not None: tracer.span("NIC", f"RDMA WRITE {size} B", t0, trace.now_us(), bytes=size, qp=a.qpn)
      for size in sizes:
        if len(sizes) > 1: dst.write(0, bytes(size))   # what an earlier, smaller write left must not pass for this one
        row = perf.measure(lambda: write(size), size, iters)
        got = dst.read(0, size)
        row["verified"] = got == data[:size]
        if not row["verified"] and bad is None: bad = (size, _first_diff(got, data[:size]))
        rows.append(row)
    finally:
      dev.set_loopback(False)
    if tracer is not None:
      from . import CommandError
      try: tracer.close()
      except OSError as e: raise CommandError(f"cannot write the trace {tracer.file.path}: {e.strerror}") from None
    ok = bad is None
    if args.json:
      print(json.dumps({"mode": "loopback", "pmtu": args.pmtu, "qp": [a.qpn, b.qpn], "rows": rows, "verified": ok},
                       indent=1))
    elif table:
      print(perf.table(rows))
      print(f"loopback: QP {a.qpn:#x} -> QP {b.qpn:#x} at PMTU {args.pmtu}, {len(sizes)} sizes x {iters} writes: "
            f"{'verified' if ok else 'MISMATCH'}")
    else:
      size, dt = sizes[0], rows[0]["lat_avg_us"] / 1e6
      print(f"loopback: QP {a.qpn:#x} -> QP {b.qpn:#x}, {size} bytes at PMTU {args.pmtu} "
            f"({max(1, -(-size // args.pmtu))} packets) in {dt * 1e3:.2f} ms: {'verified' if ok else 'MISMATCH'}")
    if not ok: print(f"  {bad[0]} bytes: first difference at byte {bad[1]}", file=sys.stderr)
    return 0 if report_device_errors(dev, "loopback") and ok else 1
  finally:
    dev.close()   # and the mock OS hcq.open made for it (its NIC threads and sockets)


# ---------------------------------------------------------------- connect (this end writes)
def run_connect(args) -> int:
  from ..drivers.bnxt import BNXTQP
  from ..errors import ConfigError
  if args.size is None: args.size = 4096
  if args.pci and not args.remote_cmd: raise ConfigError("connect --pci needs --remote-cmd")
  if args.pci:
    try: argv = shlex.split(args.remote_cmd)
    except ValueError as e: raise ConfigError(f"--remote-cmd {args.remote_cmd!r}: {e}") from None
    if not argv: raise ConfigError("--remote-cmd is empty")
  else:   # both mock PHYs bind a free port; the handshake carries the ports they got. The remote end's mock options
    # are given explicitly, so none of this end's (flags or HCQ_BNXT_MOCK_*) is applied twice.
    argv = [sys.executable, "-c", "import sys; from hcq.cli import main; sys.exit(main(sys.argv[1:]))",
            "rdma", "serve", "--mock", "--pmtu", str(args.pmtu), "--timeout", str(args.timeout),
            "--ip", args.remote_ip or MOCK_IPS[1], "--mock-mac", SERVE_MOCK_MAC, "--mock-port", "0",
            "--mock-peer", "0", "--pcap", "", "--faults", ""]
  ip = _ip(args, MOCK_IPS[0])
  dev = open_nic(args)
  status, rc = 1, 0
  try:
    remote = Remote(argv, args.timeout)
    try:
      dev.set_ip(ip)
      qp = BNXTQP(dev, pmtu=args.pmtu)
      remote.send(_endpoint(dev, qp))
      peer = remote.recv("QP number, MAC and GID")
      _connect_to(dev, qp, peer, "the remote end")
      remote.send({"size": args.size})
      target = remote.recv("target address and rkey")
      addr, rkey = field(target, "addr", "the remote end"), field(target, "rkey", "the remote end")
      src = dev.alloc(args.size)
      lkey = dev.register_mr(src)
      data = message(args.size, args.seed)
      src.write(0, data)
      from . import _rdmaperf as perf
      row = perf.measure(lambda: qp.rdma_write(addr, rkey, src.va, lkey, args.size, timeout_s=args.timeout),
                         args.size, args.iters or 1)
      dt = row["lat_avg_us"] / 1e6
      remote.send({"done": True})
      seen = remote.recv("digest of the received bytes")
      ok = field(seen, "sha256", "the remote end") == hashlib.sha256(data).hexdigest() and \
        bytes.fromhex(field(seen, "head", "the remote end")) == data[:64]
      row["verified"] = ok
      if args.json:
        print(json.dumps({"mode": "connect", "pmtu": args.pmtu, "qp": [qp.qpn, peer["qpn"]], "rows": [row],
                          "verified": ok}, indent=1))
      elif args.iters is not None:
        print(perf.table([row]))
        print(f"connect: QP {qp.qpn:#x} -> remote QP {peer['qpn']:#x} at PMTU {args.pmtu}, {args.iters} writes: "
              f"{'verified by the remote end' if ok else 'MISMATCH'}")
      else:
        print(f"connect: QP {qp.qpn:#x} -> remote QP {peer['qpn']:#x}, {args.size} bytes at PMTU {args.pmtu} into "
              f"{addr:#x} (rkey {rkey:#x}) in {dt * 1e3:.2f} ms: {'verified by the remote end' if ok else 'MISMATCH'}")
      status = 0 if report_device_errors(dev, "connect") and ok else 1
    finally:
      rc = remote.close()
  finally:
    dev.close()
  if rc != 0:
    print(f"hcq rdma connect: the remote end exited with status {rc}", file=sys.stderr)
    return 1
  return status


# ---------------------------------------------------------------- serve (the remote end)
def run_serve(args) -> int:
  from ..drivers.bnxt import BNXTQP
  out = sys.stdout
  who = "the connecting end"

  def reply(obj) -> None:
    out.write(json.dumps(obj) + "\n")
    out.flush()

  lines = LineReader(sys.stdin.fileno(), who, args.timeout)
  dev = None
  try:
    if args.gpu:
      from .rdma_gpu import run_serve_gpu
      return run_serve_gpu(args, lines, reply)
    ip = _ip(args, MOCK_IPS[1])
    dev = open_nic(args)
    dev.set_ip(ip)
    qp = BNXTQP(dev, pmtu=args.pmtu)
    size = accept_request(dev, qp, lines, reply, who)
    if size is None: return 0
    target = dev.alloc(size)
    rkey = dev.register_mr(target)
    reply({"addr": target.va, "rkey": rkey, "size": size})
    done = lines.recv("completion notice")
    if done is None: return 0
    got = target.read(0, size)
    reply({"sha256": hashlib.sha256(got).hexdigest(), "head": got[:64].hex()})
    print(f"serve: received {len(got)} bytes in QP {qp.qpn:#x}", file=sys.stderr)
    return 0 if report_device_errors(dev, "serve") else 1
  except Exception as e:   # the connecting end prints it; this end says it too
    print(f"hcq rdma serve: error: {e}", file=sys.stderr)
    reply({"error": f"{type(e).__name__}: {e}"})
    return 1
  finally:
    if dev is not None: dev.close()
