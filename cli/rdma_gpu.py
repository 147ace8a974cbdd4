"""`hcq rdma gpu`: a GPU queue drives the NIC (drivers/hcq/p2p.py). A kernel on GPU A computes c = a + b, A's compute
queue posts the RDMA WRITE of c (and then of an arrival flag) to the NIC and waits for the completions; on the other
side GPU B's queue waits for the flag, then runs out = c + c. The CPU only submits; the result is checked against numpy.

  hcq rdma gpu --mock [--size N] [--pcap FILE]        loopback: two GPUs and one NIC in PHY loopback, one process
  hcq rdma gpu --mock --connect [--size N] [--pcap F] two processes on this machine: this one (GPU A + NIC) starts
                                                      `hcq rdma serve --gpu --mock` (GPU B + NIC) on the UDP wire
  hcq rdma gpu --pci BUS --connect --remote-cmd CMD   a real NIC; the remote runs `hcq rdma serve --gpu --pci BUS`
  --gpu-iface PCI                                     the GPUs through AM (MOCKPCI+AMD on the mock: VRAM buffers,
                                                      reached by the NIC through the VRAM BAR); default KFD
                                                      (host-visible buffers)
  --gpu-iface RM                                      NVIDIA GPUs through nvidia.ko (MOCK+NV on the mock): the
                                                      GPFIFO channel posts with semaphore releases and waits with
                                                      acquires; host-memory buffers
The QP that the GPU posts to keeps its SQ and CQ in the GPU's host-visible memory (p2p.QueueMemory).

The handshake is cli/rdma.py's (JSON lines: QP, MAC, GID, wire endpoint; then the target buffer and flag with their
keys; at the end the remote's digest of `out`). Exit status as hcq rdma's: 0 verified, 1 failed, 2 a usage error.
"""
from __future__ import annotations

import hashlib
import sys
import time

FLAG_VALUE = 1


def _vectors(size: int, seed: int):
  import numpy as np
  rng = np.random.default_rng(seed)
  n = size // 4
  return rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)


def _expected(size: int, seed: int) -> bytes:
  a, b = _vectors(size, seed)
  c = a + b
  return (c + c).tobytes()


def _check_size(args) -> None:
  from ..errors import ConfigError
  if args.size % 4: raise ConfigError(f"--size {args.size}: the kernels add float32 vectors, give a multiple of 4")


def _config(args):
  """The run's configuration: the mock wire's flags over HCQ_BNXT_MOCK_* (as cli/rdma.py open_nic)."""
  from ..config import from_env
  from .rdma_channel import MOCK_FLAGS
  given = {k: getattr(args, flag) for k, flag in MOCK_FLAGS.items() if getattr(args, flag, None) is not None}
  return from_env().replace(timeout_s=args.timeout, **given)


def _open(args, gpus: int):
  """(os, [GPUs], BNXTDev) on one machine: AMD GPUs over KFD or AM, or NVIDIA GPUs over RM (--gpu-iface); the mock's
  GPUs and NIC share its PCI fabric; with --pci the host's GPUs and the Thor2 at BUS."""
  if args.gpu_iface == "RM": from ..drivers.nv import open_device
  else: from ..drivers.amd import open_device
  from ..drivers.bnxt import open_pci
  cfg = _config(args)
  if args.pci:
    from ..drivers.system import LinuxOS
    os = LinuxOS(cfg)
  else:
    from .. import _mock_fabric_os
    os = _mock_fabric_os(cfg, gpus, args.gpu_iface)
  opened = []
  try:
    for i in range(gpus): opened.append(open_device(args.gpu_iface, i, os, cfg))
    if args.pci: nic = open_pci(os, cfg, args.pci)
    else:
      from ..drivers.bnxt import find_devices
      nic = open_pci(os, cfg, find_devices(os)[0].addr)
  except BaseException:
    for g in opened: g.close()
    if not args.pci: os.close()
    raise
  return os, opened, nic


def _close(args, os, gpus, nic) -> None:
  try:
    for g in gpus: g.close()
    nic.close()
  finally:
    if not args.pci: os.close()


def _host(gpu) -> bool:
  """Buffers a peer reaches: host-visible memory on KFD and RM, VRAM (through the BAR) on AM."""
  return not hasattr(gpu.session, "am")


def _vadd(gpu):
  """c = a + b over n float32s on gpu: the AMD demo code object, or the PTX of drivers/nv/demo.py (grid in blocks)."""
  from ..drivers.nv import NVDevice
  if isinstance(gpu, NVDevice):
    from ..drivers.nv.demo import VADD_PTX
    prog = gpu.load(VADD_PTX, "vadd")
    return lambda a, b, c, n: prog(a, b, c, n, global_size=(-(-n // 64),), local_size=(64,))
  from ..drivers.amd.kernels import demo_code_object
  prog = gpu.load(demo_code_object(), "vadd")
  return lambda a, b, c, n: prog(a, b, c, n, global_size=(n,), local_size=(64,))


def _produce(gpu, nic, size: int, seed: int):
  """GPU A's side: a, b copied in, the kernel c = a + b submitted; (Local of c, Local of the flag slot)."""
  from ..drivers.hcq import p2p
  a, b = _vectors(size, seed)
  host = _host(gpu)
  ba, bb, bc = (gpu.alloc(size, host=host) for _ in range(3))
  slot = gpu.alloc(p2p.FLAG_BYTES, host=True)
  gpu.copyin(ba, a.tobytes())
  gpu.copyin(bb, b.tobytes())
  c_local, _ = p2p.register(nic, gpu, bc)
  slot_local, _ = p2p.register(nic, gpu, slot)
  _vadd(gpu)(ba, bb, bc, size // 4)
  return c_local, slot_local


def _consume_setup(gpu, nic, size: int):
  """GPU B's side: the target and the flag registered; its queue waits for the flag, then out = dst + dst.
  Returns (Remote of dst, Remote of the flag, out buffer)."""
  from ..drivers.hcq import p2p
  host = _host(gpu)
  dst, flag, out = gpu.alloc(size, host=host), gpu.alloc(p2p.FLAG_BYTES, host=host), gpu.alloc(size, host=host)
  _, dst_remote = p2p.register(nic, gpu, dst)
  _, flag_remote = p2p.register(nic, gpu, flag)
  p2p.wait_arrival(gpu, flag.va, FLAG_VALUE)
  _vadd(gpu)(dst, dst, out, size // 4)
  return dst_remote, flag_remote, out


def run_gpu(args) -> int:
  _check_size(args)
  return _run_connect(args) if args.connect else _run_loopback(args)


def _run_loopback(args) -> int:
  from ..drivers.bnxt import BNXTQP
  from ..drivers.bnxt.gpuq import GPUPoster
  from ..drivers.hcq import p2p
  from ..errors import ConfigError
  from .rdma_channel import MOCK_IPS, _first_diff, _ip, report_device_errors
  if args.pci: raise ConfigError("rdma gpu in loopback needs two GPUs and PHY loopback: use --mock, or --connect")
  os, (ga, gb), nic = _open(args, 2)
  try:
    nic.set_ip(_ip(args, MOCK_IPS[0]))
    qa, qb = BNXTQP(nic, pmtu=args.pmtu, queue_memory=p2p.QueueMemory(ga)), BNXTQP(nic, pmtu=args.pmtu)
    qa.connect(qb.qpn, nic.gid, nic.mac)
    qb.connect(qa.qpn, nic.gid, nic.mac)
    nic.set_loopback(True)
    poster = GPUPoster(qa, ga)
    dst, flag, out = _consume_setup(gb, nic, args.size)
    c, slot = _produce(ga, nic, args.size, args.seed)
    t0 = time.perf_counter()
    sent = p2p.rdma_write(ga, poster, c, dst, args.size, flag=(slot, flag, FLAG_VALUE))
    p2p.wait(ga, sent, poster)
    gb.synchronize()
    dt = time.perf_counter() - t0
    got, want = gb.copyout(out), _expected(args.size, args.seed)
    ok = got == want
    print(f"gpu loopback: {ga.name} -> QP {qa.qpn:#x} -> QP {qb.qpn:#x} -> {gb.name}, {args.size} bytes at PMTU "
          f"{args.pmtu}, posted and completed by the GPU queue in {dt * 1e3:.2f} ms: "
          f"{'verified against numpy' if ok else 'MISMATCH'}")
    if not ok: print(f"  first difference at byte {_first_diff(got, want)}", file=sys.stderr)
    return 0 if report_device_errors(nic, "gpu") and ok else 1
  finally:
    _close(args, os, [ga, gb], nic)


def _run_connect(args) -> int:
  import shlex
  from ..drivers.bnxt import BNXTQP
  from ..drivers.bnxt.gpuq import GPUPoster
  from ..drivers.hcq import p2p
  from ..errors import ConfigError
  from .rdma_channel import MOCK_IPS, SERVE_MOCK_MAC, Remote, _connect_to, _endpoint, _ip, field, report_device_errors
  if args.pci:
    if not args.remote_cmd: raise ConfigError("gpu --connect --pci needs --remote-cmd")
    try: argv = shlex.split(args.remote_cmd)
    except ValueError as e: raise ConfigError(f"--remote-cmd {args.remote_cmd!r}: {e}") from None
  else:
    argv = [sys.executable, "-c", "import sys; from hcq.cli import main; sys.exit(main(sys.argv[1:]))",
            "rdma", "serve", "--gpu", "--gpu-iface", args.remote_gpu_iface or args.gpu_iface, "--mock",
            "--pmtu", str(args.pmtu),
            "--timeout", str(args.timeout),
            "--ip", args.remote_ip or MOCK_IPS[1], "--mock-mac", SERVE_MOCK_MAC, "--mock-port", "0",
            "--mock-peer", "0", "--pcap", "", "--faults", ""]
  os, (gpu,), nic = _open(args, 1)
  status, rc = 1, 0
  try:
    remote = Remote(argv, args.timeout)
    try:
      nic.set_ip(_ip(args, MOCK_IPS[0]))
      qp = BNXTQP(nic, pmtu=args.pmtu, queue_memory=p2p.QueueMemory(gpu))
      remote.send(_endpoint(nic, qp))
      peer = remote.recv("QP number, MAC and GID")
      _connect_to(nic, qp, peer, "the remote end")
      poster = GPUPoster(qp, gpu)
      remote.send({"size": args.size})
      target = remote.recv("target and flag addresses with their rkeys")
      who = "the remote end"
      dst = p2p.Remote(field(target, "addr", who), field(target, "rkey", who), args.size)
      flag = p2p.Remote(field(target, "flag_addr", who), field(target, "flag_rkey", who), p2p.FLAG_BYTES)
      c, slot = _produce(gpu, nic, args.size, args.seed)
      t0 = time.perf_counter()
      sent = p2p.rdma_write(gpu, poster, c, dst, args.size, flag=(slot, flag, FLAG_VALUE))
      p2p.wait(gpu, sent, poster)
      dt = time.perf_counter() - t0
      seen = remote.recv("digest of the remote kernel's output")
      want = _expected(args.size, args.seed)
      ok = field(seen, "sha256", who) == hashlib.sha256(want).hexdigest()
      print(f"gpu connect: {gpu.name} -> QP {qp.qpn:#x} -> remote QP {peer['qpn']:#x}, {args.size} bytes at PMTU "
            f"{args.pmtu} into {dst.va:#x} (rkey {dst.rkey:#x}), posted and completed by the GPU queue in "
            f"{dt * 1e3:.2f} ms; the remote kernel's output: {'verified against numpy' if ok else 'MISMATCH'}")
      status = 0 if report_device_errors(nic, "gpu") and ok else 1
    finally:
      rc = remote.close()
  finally:
    _close(args, os, [gpu], nic)
  if rc != 0:
    print(f"hcq rdma gpu: the remote end exited with status {rc}", file=sys.stderr)
    return 1
  return status


def run_serve_gpu(args, lines, reply) -> int:
  """`hcq rdma serve --gpu`: GPU B + NIC; its queue waits for the flag, then runs its kernel; replies the digest."""
  from ..drivers.bnxt import BNXTQP
  from .rdma_channel import MOCK_IPS, _ip, accept_request, report_device_errors
  who = "the connecting end"
  os, (gpu,), nic = _open(args, 1)
  try:
    nic.set_ip(_ip(args, MOCK_IPS[1]))
    qp = BNXTQP(nic, pmtu=args.pmtu)
    size = accept_request(nic, qp, lines, reply, who)
    if size is None: return 0
    if size % 4: raise ValueError(f"size {size}: not a multiple of 4 (float32 vectors)")
    dst, flag, out = _consume_setup(gpu, nic, size)
    reply({"addr": dst.va, "rkey": dst.rkey, "flag_addr": flag.va, "flag_rkey": flag.rkey, "size": size})
    gpu.synchronize()          # the flag arrived and the kernel ran (bounded by --timeout)
    got = gpu.copyout(out)
    reply({"sha256": hashlib.sha256(got).hexdigest(), "head": got[:64].hex()})
    print(f"serve --gpu: {gpu.name} received {size} bytes in QP {qp.qpn:#x} and ran its kernel", file=sys.stderr)
    return 0 if report_device_errors(nic, "serve") else 1
  finally:
    _close(args, os, [gpu], nic)
