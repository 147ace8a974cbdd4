"""RDMA WRITE through the BNXT driver and the mock Thor2 in PHY loopback: latency of small writes and throughput of
large ones, at PMTU 1024 and 4096, in one run.

    .venv/bin/python bench/rdma.py [--device MOCK+BNXT] [--small 64] [--large 1M] [--iters 200] [--repeat 3] [--no-gpu]
                                   [--gpu-ifaces KFD,RM]

Then the GPU-driven path against the CPU-driven one on the same QP, in one run (mock only: a mock GPU and the mock
Thor2 on one PCI fabric, drivers/hcq/p2p.py; per --gpu-ifaces: KFD, a mock gfx1100 whose PM4 compute queue posts, RM,
a mock H200 whose GPFIFO compute channel posts with semaphore releases and waits with acquires): the CPU posts and
polls (BNXTQP.rdma_write), or the GPU's queue writes the WQE, rings the doorbell and waits for the CQE while the host
waits for the GPU's timeline (p2p.rdma_write + p2p.wait). On the mock the GPU path adds the queue's packet interpretation; on hardware it removes
the host from the data and control path, which is what it is for.

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
  ap.add_argument("--no-gpu", action="store_true", help="skip the GPU-driven vs CPU-driven comparison")
  ap.add_argument("--gpu-ifaces", default="KFD,RM", help="the mock GPUs of the comparison: KFD (AMD), RM (NVIDIA)")
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
  if not args.no_gpu:
    for iface in args.gpu_ifaces.split(","): gpu_vs_cpu(args, iface.strip())
  return 0


def gpu_vs_cpu(args, iface: str = "KFD") -> None:
  """The same RDMA WRITEs posted by the CPU and by a GPU queue (a mock GPU + the mock Thor2 on one fabric)."""
  from hcq import _mock_fabric_os
  from hcq.config import from_env
  from hcq.drivers.bnxt import BNXTQP, find_devices, open_pci
  from hcq.drivers.bnxt.gpuq import GPUPoster
  from hcq.drivers.hcq import p2p
  if iface == "RM": from hcq.drivers.nv import open_device
  else: from hcq.drivers.amd import open_device
  cfg = from_env().replace(timeout_s=120.0)
  os = _mock_fabric_os(cfg, 1, iface)
  gpu = open_device(iface, 0, os, cfg)
  nic = open_pci(os, cfg, find_devices(os)[0].addr)
  try:
    nic.set_ip("10.0.200.5")
    # an NV GPU reaches only memory registered at its own addresses: the QP's queues in its host memory
    qmem = p2p.QueueMemory(gpu) if iface == "RM" else None
    a, b = BNXTQP(nic, pmtu=4096, queue_memory=qmem), BNXTQP(nic, pmtu=4096)
    a.connect(b.qpn, nic.gid, nic.mac)
    b.connect(a.qpn, nic.gid, nic.mac)
    nic.set_loopback(True)
    src, dst = gpu.alloc(args.large, host=True), gpu.alloc(args.large, host=True)
    (src_l, _), (_, dst_r) = p2p.register(nic, gpu, src), p2p.register(nic, gpu, dst)
    poster = GPUPoster(a, gpu)

    def cpu(n): a.rdma_write(dst_r.va, dst_r.rkey, src_l.va, src_l.lkey, n, timeout_s=120)
    def by_gpu(n): p2p.wait(gpu, p2p.rdma_write(gpu, poster, src_l, dst_r, n), poster)

    print(f"\nGPU-driven vs CPU-driven RDMA WRITE, mock {gpu.arch} ({iface}) + mock Thor2, PMTU 4096 "
          f"(median of {args.repeat})")
    print(f"{'path':>5} {'small B':>8} {'lat us':>9} {'large B':>9} {'MB/s':>8}")
    for name, post in (("cpu", cpu), ("gpu", by_gpu)):
      lat, bw = [], []
      for _ in range(args.repeat):
        t0 = time.perf_counter()
        for _ in range(args.iters): post(args.small)
        lat.append((time.perf_counter() - t0) / args.iters)
        t0 = time.perf_counter()
        post(args.large)
        bw.append(args.large / (time.perf_counter() - t0))
      print(f"{name:>5} {args.small:>8} {statistics.median(lat) * 1e6:>9.1f} {args.large:>9} "
            f"{statistics.median(bw) / 1e6:>8.1f}")
  finally:
    gpu.close()
    nic.close()
    os.close()


if __name__ == "__main__":
  raise SystemExit(main())
