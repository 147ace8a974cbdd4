"""The USB bridge path through the mock bridge (pyusb with the mock backend; the driver code is the hardware's):
TLPs per second, copy bandwidth (streaming through a BAR, bounced through the SRAM both ways), the USB transfers
each operation costs, and the USB transactions (and TLPs) of one kernel launch on MOCKUSB+AMD, which is the figure
that matters on hardware (each transfer is ~100 us there; the mock's speed only measures the driver's own overhead).

    .venv/bin/python bench/usb.py [--tlps 20000] [--copy-mib 16] [--repeat 3]   # the bridge alone
    .venv/bin/python bench/usb.py --launch [--launches 100] [--copy-mib 16] [--firmware-dir DIR]  # MOCKUSB+AMD:
                                                                  # per launch, and its copies by each path
    .venv/bin/python bench/usb.py --am-boot [--firmware-dir DIR]  # the AM boot of the mock Navi 31 behind
                                                                         # the bridge: its USB transfers, by kind

Requests in flight (issue 33): a copy's bursts go with up to K bulk requests in flight (asm24.BULK_IN_FLIGHT,
usbpipeline.py); each run prints, per 16 MiB copy-in and per K, the bulk requests that were in flight at most, the
USB transfers and the round trips (the host's waits for the bridge: one per synchronous transfer, one per wait for
the transfers in flight). With K in flight the round trips fall by about K; the transfers stay the same.

Transactions per launch, hcq (counted by the mock bridge): the kernel arguments (one streaming MWr: a vendor
control request + its bulk OUT = 2), the ring's written span (2), the HDP flush that makes those BAR writes reach
VRAM before the engine reads them (one posted 32-bit MWr: 1), one 64-bit doorbell (2): 7; then 1 per poll of the
timeline signal, AMD_USB_POLL_US apart (it lives in the bridge's a000 window: one XDATA read), + 1 read that confirms
the value that ends the wait (the controller reads its XDATA byte by byte, so a read may be torn).

The reference lineage's count for the same launch, derived from its protocol (tinygrad 0.14's
runtime/support/usb.py): its BARs are served by a 4-byte-aligned streaming
MMIO interface, each access one 0xF0 request plus its bulk data (2 transfers); a launch writes the kernel arguments
(2), copies the PM4 dwords into the ring (2), writes the 64-bit write pointer into the queue's gart page (2) and
rings the 64-bit doorbell (2): 8 (no HDP flush: the reference flushes it on AM over PCI, not over USB); its signal
wait spins on 0xF0 reads (request + completion: 2 each) with no pause between polls (USBIface.sleep is a no-op), so a
kernel of T microseconds costs another ~2 * T / 200 transfers at ~100 us each: 8 + 2 * polls, polls unpaced.
hcq: 7 + polls + 1, polls paced by AMD_USB_POLL_US (the write pointer is not written: the engines take it from the
doorbell).

This file's name is pyusb's package name, and python puts a script's folder first on sys.path: a script of bench/
whose imports reach pyusb (`bench/launch.py --device MOCKUSB+AMD`, and this script itself) would import this file as
`usb`. Imported under that name, it hands the name over to pyusb (bench/ left out of the search for that one import)."""
from __future__ import annotations

import sys

if __name__ == "usb":       # imported as pyusb's package from a script in bench/: pyusb is meant
  import importlib
  import os
  _here, _saved = os.path.dirname(os.path.abspath(__file__)), sys.path[:]
  sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _here]
  try:
    del sys.modules["usb"]
    sys.modules["usb"] = importlib.import_module("usb")   # what `import usb` returns: the import system reads it back
  finally: sys.path[:] = _saved

import argparse
import os as _os
import time


def best_of(repeat: int, fn) -> float:
  best = float("inf")
  for _ in range(repeat):
    t = time.perf_counter()
    fn()
    best = min(best, time.perf_counter() - t)
  return best


def transfers(dev, fn) -> int:
  n = dev.bridge.transfers
  fn()
  return dev.bridge.transfers - n


def main(argv=None) -> int:
  def positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1: raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of 1 or more")
    return int(text)
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--tlps", type=positive, default=20000)
  ap.add_argument("--copy-mib", type=positive, default=16)
  ap.add_argument("--repeat", type=positive, default=3)
  ap.add_argument("--am-boot", action="store_true", help="only the AM boot through the bridge (needs AMD's firmware)")
  ap.add_argument("--launch", action="store_true", help="only the USB transactions per launch on MOCKUSB+AMD")
  ap.add_argument("--launches", type=positive, default=100)
  ap.add_argument("--firmware-dir", help="AMD's firmware folder (default: the config's, HCQ_FIRMWARE_DIR)")
  args = ap.parse_args(argv)
  from hcq.errors import HCQError
  try:
    if args.am_boot: return am_boot(args.firmware_dir)
    if args.launch: return launch(args.firmware_dir, args.launches, args.copy_mib)
  except HCQError as e:     # no firmware, a device error: one line, not a traceback
    print(f"bench/usb.py: error: {e}", file=sys.stderr)
    return 1
  from hcq.config import Config
  from hcq.drivers.amd.am.usbstaging import SRAMStaging
  from hcq.drivers.system.usbpci import USBPCIDevice
  from hcq.mockgpu import MockOS
  from hcq.mockgpu.usb import mock_usb_bridge
  from hcq.mockgpu.usb import endpoint as ep

  os = MockOS(Config(amd_usb_poll_us=0))
  mock_usb_bridge(os)
  dev = USBPCIDevice.open(os)
  mmio, db, vram = dev.map_bar(5), dev.map_bar(2), dev.map_bar(0)

  staging = SRAMStaging(dev, ep.copy_engine(mmio))    # the mock endpoint's copy engine: nine posted register writes
  n, size = args.tlps, args.copy_mib << 20
  data = _os.urandom(size)

  t_wr = best_of(args.repeat, lambda: [mmio.write32(0x100, i) for i in range(n)])
  t_rd = best_of(args.repeat, lambda: [mmio.read32(0x100) for i in range(n)])
  t_bar_in = best_of(args.repeat, lambda: vram.write(0, data))
  t_bar_out = best_of(args.repeat, lambda: vram.read(0, size))
  t_st_in = best_of(args.repeat, lambda: staging.copyin(dev.bar(0).start, data))
  t_st_out = best_of(args.repeat, lambda: staging.copyout(dev.bar(0).start, size))
  assert staging.copyout(dev.bar(0).start, size) == data

  page = bytes(4096)
  costs = {
    "MMIO write (32-bit, posted)": transfers(dev, lambda: mmio.write32(0x100, 1)),
    "MMIO read (32-bit)": transfers(dev, lambda: mmio.read32(0x100)),
    "doorbell write (64-bit, one TLP)": transfers(dev, lambda: db.write64(0, 1)),
    "4 KiB through the VRAM BAR (streaming MWr)": transfers(dev, lambda: vram.write(0, page)),
    "4 KiB into the SRAM (DMA engine)": transfers(dev, lambda: dev.sram.write(0, page)),
    "4 KiB copy-in bounced through the SRAM (+ engine's 9 writes, fence)": transfers(dev, lambda: staging.copyin(dev.bar(0).start, page)),
    "4 KiB copy-out bounced through the SRAM": transfers(dev, lambda: staging.copyout(dev.bar(0).start, 4096)),
  }
  print(f"TLPs/s          posted MWr {n / t_wr:10.0f}   MRd (request + completion) {n / t_rd:10.0f}")
  print(f"BAR streaming   in {size / t_bar_in / 2**20:8.1f} MiB/s   out {size / t_bar_out / 2**20:8.1f} MiB/s   ({args.copy_mib} MiB)")
  print(f"SRAM staging    in {size / t_st_in / 2**20:8.1f} MiB/s   out {size / t_st_out / 2**20:8.1f} MiB/s   (2 x 128 KiB, fenced)")
  print("USB transfers per operation (hardware: ~100 us each):")
  for what, count in costs.items(): print(f"  {count:4d}  {what}")
  print(f"{args.copy_mib} MiB copy-in through the VRAM BAR (streaming MWr, 4 MiB per request; {dev.bridge.transfers_queue().mode}):")
  for k, r in bar_in_flight(dev, data).items():
    print(f"  K={k}: {r['max_in_flight']} bulk requests in flight at most, {r['transfers']} transfers, "
          f"{r['round_trips']} round trips{'  (asm24.BULK_IN_FLIGHT)' if r['default'] else ''}")
  dev.close()
  os.close()
  return 0


def in_flight(bridge, k: int, fn) -> dict:
  """fn() run with K = k bulk requests in flight on `bridge` (an ASM24Bridge): the most that were in flight, its
  transfers and round trips."""
  saved, bridge.in_flight, bridge.bulk_max_in_flight = bridge.in_flight, k, 0   # K=1: the synchronous path, 1 at a time
  n, trips = bridge.transfers, bridge.round_trips
  try: fn()
  finally: bridge.in_flight = saved
  return {"max_in_flight": bridge.bulk_max_in_flight or 1, "transfers": bridge.transfers - n,
          "round_trips": bridge.round_trips - trips}


def bar_in_flight(dev, data: bytes, depths=(1, 2, 4)) -> dict:
  """The copy-in of `data` through the VRAM BAR of a USBPCIDevice with K = each of depths bulk requests in flight,
  checked against numpy (read back)."""
  import numpy as np
  from hcq.drivers.system import asm24
  vram, want, out = dev.map_bar(0), np.frombuffer(data, np.uint8), {}
  for k in sorted(set(depths) | {asm24.BULK_IN_FLIGHT}):
    vram.write(0, bytes(len(data)))
    out[k] = in_flight(dev.bridge, k, lambda: vram.write(0, data))
    out[k]["default"] = k == asm24.BULK_IN_FLIGHT
    assert np.array_equal(np.frombuffer(vram.read(0, len(data)), np.uint8), want), f"K={k}: the BAR holds other data"
  return out


def launch(firmware_dir: str | None, launches: int, copy_mib: int = 16) -> int:
  r = launch_transfers(firmware_dir, launches)
  print(f"one launch on MOCKUSB+AMD (vadd, {launches} launches): {r['launch']:.1f} USB transactions "
        f"({r['launch_tlps']:.1f} TLPs) to submit, {r['wait']:.1f} ({r['wait_tlps']:.1f} TLPs) to wait for it "
        f"({r['polls']:.1f} polls of the timeline signal); {r['us_per_launch']:.0f} us per launch + wait on the mock")
  print(f"  by kind per launch: " + ", ".join(f"{k} {v:.1f}" for k, v in sorted(r["by_kind"].items())))
  print(f"  the reference lineage's launch (derived in this script's docstring): 8 + 2 per poll, polls unpaced; "
        f"hcq: {r['launch']:.0f} + 1 per poll + 1, paced by AMD_USB_POLL_US")
  for path, c in device_copies(firmware_dir, copy_mib).items():
    print(f"  copies of {c['mib']} MiB on MOCKUSB+AMD through {c['what']}: in {c['in_mibs']:7.1f} MiB/s "
          f"({c['in_transfers']} transfers, {c['in_round_trips']} round trips, {c['in_flight']} bulk requests in "
          f"flight at most), out {c['out_mibs']:7.1f} MiB/s ({c['out_transfers']} transfers)")
  for path, per_k in device_in_flight(firmware_dir, copy_mib).items():
    print(f"  {copy_mib} MiB copy-in through {path} by K bulk requests in flight: " + "; ".join(
      f"K={k}: {r['max_in_flight']} in flight, {r['transfers']} transfers, {r['round_trips']} round trips"
      for k, r in per_k.items()))
  return 0


def device_in_flight(firmware_dir: str | None, mib: int = 16, depths=(1, 2, 4)) -> dict:
  """Per copy path ("sram", "bar") and K: a `mib` MiB copy-in on MOCKUSB+AMD (checked by its copy-out against
  numpy): bulk requests in flight at most, transfers, round trips. The SRAM path has at most its two halves in flight."""
  import numpy as np
  import hcq
  from hcq.config import Config, from_env
  data = np.random.default_rng(mib).integers(0, 256, mib << 20, dtype=np.uint8)
  out: dict = {}
  with hcq.open("MOCKUSB+AMD", Config(firmware_dir=firmware_dir or from_env().firmware_dir)) as dev:
    bridge, buf = dev.session.usb.bridge, dev.alloc(mib << 20)
    for path in ("sram", "bar"):
      dev.copy_path = path
      for k in depths:
        out.setdefault(path, {})[k] = in_flight(bridge, k, lambda: dev.copyin(buf, data.tobytes()))
        assert np.array_equal(np.frombuffer(dev.copyout(buf), np.uint8), data), f"{path}, K={k}: the copy-out differs"
  return out


def device_copies(firmware_dir: str | None, mib: int = 16) -> dict:
  """Copy-in and copy-out of `mib` MiB on MOCKUSB+AMD by each copy path: MiB/s on the mock and USB transfers."""
  import hcq
  from hcq.config import Config, from_env
  size, out = mib << 20, {}
  data = _os.urandom(size)
  with hcq.open("MOCKUSB+AMD", Config(firmware_dir=firmware_dir or from_env().firmware_dir)) as dev:
    bridge, buf = dev.os.devices[0].bridge, dev.alloc(size)
    driver = dev.session.usb.bridge
    for path, what in (("sram", "the bridge SRAM (2 x 256 KiB, GPU work queued, sentinels/releases + fence)"),
                       ("bar", "the VRAM BAR (streaming MWr/MRd)"),
                       ("auto", "the path measured cheaper (drivers/amd/am/usbcopypath.py; the measurement's copies)"),
                       ("auto", "the path measured cheaper, measured")):
      dev.copy_path = path
      bridge.arm_faults("")
      trips, driver.bulk_max_in_flight = driver.round_trips, 0
      t = time.perf_counter()
      dev.copyin(buf, data)
      t_in, n_in = time.perf_counter() - t, bridge.transfer_number
      trips_in, flight = driver.round_trips - trips, driver.bulk_max_in_flight
      bridge.arm_faults("")
      t = time.perf_counter()
      back = dev.copyout(buf)
      t_out, n_out = time.perf_counter() - t, bridge.transfer_number
      assert back == data, f"{path}: the copy-out differs from what was copied in"
      if path == "auto": what += f": in {dev.copy_paths.choice['in']} {dev.copy_paths.costs['in']}, out {dev.copy_paths.choice['out']}"
      out[path if path not in out else "auto_measured"] = {"mib": mib, "what": what, "in_mibs": mib / t_in, "out_mibs": mib / t_out, "in_transfers": n_in,
                   "out_transfers": n_out, "in_round_trips": trips_in, "in_flight": flight}
  return out


def launch_transfers(firmware_dir: str | None, launches: int = 100) -> dict:
  """USB transactions (transfers the mock bridge saw) and TLPs of `launches` launches of the demo vadd on
  MOCKUSB+AMD, each waited for: submit (the launch call) and wait (synchronize) apart, per launch."""
  import collections
  import hcq
  from hcq.config import Config, from_env
  from hcq.drivers.amd.kernels import demo_code_object

  n = 1024
  with hcq.open("MOCKUSB+AMD", Config(firmware_dir=firmware_dir or from_env().firmware_dir)) as dev:
    bridge = dev.os.devices[0].bridge     # the mock bridge: what crossed the (mock) USB
    driver = dev.session.usb.bridge         # the driver's own tally by kind
    prog = dev.load(demo_code_object(), "vadd")
    a, b, c = (dev.alloc(4 * n) for _ in range(3))
    prog(a, b, c, n, global_size=(n // 256,), local_size=(256,), wait=True)     # shapes built, registers on the queue
    totals = collections.Counter()
    kinds = collections.Counter(driver.counts)
    fw = bridge.fw
    t = time.perf_counter()
    for _ in range(launches):
      bridge.arm_faults("")                 # the mock bridge counts transfers from here
      tlps, polls = fw.counts["tlps"], dev.timeline.signal.polls
      prog(a, b, c, n, global_size=(n // 256,), local_size=(256,))
      submit, submit_tlps = bridge.transfer_number, fw.counts["tlps"] - tlps
      dev.synchronize()
      totals.update(launch=submit, launch_tlps=submit_tlps, wait=bridge.transfer_number - submit,
                    wait_tlps=fw.counts["tlps"] - tlps - submit_tlps, polls=dev.timeline.signal.polls - polls)
    took = time.perf_counter() - t
    by_kind = collections.Counter(driver.counts) - kinds
  return {"launch": totals["launch"] / launches, "wait": totals["wait"] / launches, "polls": totals["polls"] / launches,
          "launch_tlps": totals["launch_tlps"] / launches, "wait_tlps": totals["wait_tlps"] / launches,
          "by_kind": {k: v / launches for k, v in by_kind.items()}, "us_per_launch": took / launches * 1e6}


def am_boot(firmware_dir: str | None) -> int:
  r = am_boot_transfers(firmware_dir)
  print(f"AM boot through the bridge to {r['stage']}: {r['transfers']} USB transfers after the bridge set-up "
        f"({r['setup']}), {r['tlps']} TLP requests, {r['seconds']:.2f} s on the mock (~{r['transfers'] * 1e-4:.2f} s "
        f"of transfers on hardware at ~100 us each)")
  for kind, n in sorted(r["by_kind"].items()): print(f"  {n:6d}  {kind}")
  return 0


def am_boot_transfers(firmware_dir: str | None) -> dict:
  """AMDev's full boot (discovery .. RLC autoload, AMD's real firmware) of the mock Navi 31 behind the mock bridge:
  the USB transfers it takes after the bridge's set-up (USBPCIDevice.open), in all and by kind."""
  import collections
  from hcq.config import Config, from_env
  from hcq.drivers.amd.am.device import AMDev
  from hcq.drivers.system.usbpci import USBPCIDevice
  from hcq.mockgpu import MockOS
  from hcq.mockgpu.amd.am.gpu import add_navi31_usb

  os = MockOS(Config(firmware_dir=firmware_dir or from_env().firmware_dir))
  try:
    gpu = add_navi31_usb(os)
    dev = USBPCIDevice.open(os)
    before, tlps = collections.Counter(dev.bridge.counts), gpu.bridge.fw.counts["tlps"]
    t = time.perf_counter()
    with AMDev(os, None, os.config, device=dev) as am:
      took, stage, by_kind = time.perf_counter() - t, am.stage, collections.Counter(dev.bridge.counts) - before
      tlps = gpu.bridge.fw.counts["tlps"] - tlps
    return {"stage": stage, "setup": sum(before.values()), "transfers": sum(by_kind.values()), "by_kind": dict(by_kind),
            "tlps": tlps, "seconds": took}
  finally: os.close()

if __name__ == "__main__":
  raise SystemExit(main())
