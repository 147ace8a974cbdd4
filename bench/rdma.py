"""RDMA WRITE through the BNXT driver and the mock Thor2 in PHY loopback: latency of small writes and throughput of
large ones, at PMTU 1024 and 4096, in one run.

    .venv/bin/python bench/rdma.py [--device MOCK+BNXT] [--small 64] [--large 1M] [--iters 200] [--repeat 3]

The mock is pure Python (per-packet struct packing, CRC-32 in zlib, a UDP datagram per frame), so its figures measure
the driver plus the emulator, not a NIC. For context the script prints the RoCEv2 goodput ceiling of a real 400G link
at each PMTU: payload / (payload + 82) per packet (preamble+IFG 20, Ethernet 14, FCS 4, IPv4 20, UDP 8, BTH 12, ICRC 4;
IBTA Annex A17 RoCEv2 and IEEE 802.3 framing)."""
from __future__ import annotations

import argparse
import statistics
import time


def size_arg(text: str) -> int:
  mult = {"K": 1 << 10, "M": 1 << 20}.get(text[-1:].upper(), 1)
  return int(text[:-1] if mult > 1 else text) * mult


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--device", default="MOCK+BNXT")
  ap.add_argument("--small", type=size_arg, default=64)
  ap.add_argument("--large", type=size_arg, default=1 << 20)
  ap.add_argument("--iters", type=int, default=200)
  ap.add_argument("--repeat", type=int, default=3)
  args = ap.parse_args(argv)
  import hcq
  from hcq.drivers.bnxt import BNXTQP
  dev = hcq.open(args.device)
  try:
    dev.set_ip("10.0.200.5")
    dev.set_loopback(True)
    src, dst = dev.alloc(args.large), dev.alloc(args.large)
    lkey, rkey = dev.register_mr(src), dev.register_mr(dst)
    src.write(0, bytes(range(256)) * (args.large // 256) + bytes(args.large % 256))
    print(f"{args.device}: RDMA WRITE in PHY loopback, one QP pair per PMTU (median of {args.repeat} runs)")
    print(f"{'PMTU':>5} {'small B':>8} {'lat us':>9} {'large B':>9} {'MB/s':>8} {'pkts/s':>9} {'400G ceiling Gb/s':>18}")
    for pmtu in (1024, 4096):
      a, b = BNXTQP(dev, pmtu=pmtu), BNXTQP(dev, pmtu=pmtu)
      a.connect(b.qpn, dev.gid, dev.mac)
      b.connect(a.qpn, dev.gid, dev.mac)
      lat, bw = [], []
      for _ in range(args.repeat):
        t0 = time.perf_counter()
        for _ in range(args.iters): a.rdma_write(dst.va, rkey, src.va, lkey, args.small)
        lat.append((time.perf_counter() - t0) / args.iters)
        t0 = time.perf_counter()
        a.rdma_write(dst.va, rkey, src.va, lkey, args.large, timeout_s=120)
        bw.append(args.large / (time.perf_counter() - t0))
      if dst.read(0, args.large) != src.read(0, args.large): raise SystemExit("bench: the large write arrived corrupted")
      l, b_ = statistics.median(lat), statistics.median(bw)
      pkts = -(-args.large // pmtu)
      print(f"{pmtu:>5} {args.small:>8} {l * 1e6:>9.1f} {args.large:>9} {b_ / 1e6:>8.1f} {b_ / args.large * pkts:>9.0f} "
            f"{400 * pmtu / (pmtu + 82):>18.1f}")
    dev.set_loopback(False)
  finally:
    dev.close()
  return 0


if __name__ == "__main__":
  raise SystemExit(main())
