"""Throughput of the mock AMD GPU's command processors (no kernels): PM4 packets per second, SDMA copy bandwidth,
and the doorbell-to-event round trip through mock KFD ioctls (RELEASE_MEM interrupt -> WAIT_EVENTS).

    .venv/bin/python bench/mock_queues.py [--packets 20000] [--copy-mib 64] [--repeat 3]

Figures are wall-clock on whatever machine runs it (the 2-core development box is shared: expect noise)."""
from __future__ import annotations

import argparse
import ctypes
import os as _os
import time


def pm4_write_data(addr: int, value: int) -> list[int]:
  # nvd.h PACKET3(WRITE_DATA, 3): control (DST_SEL 5 = memory), address, value
  return [(3 << 30) | (3 << 16) | (0x37 << 8), 5 << 8, addr & 0xFFFFFFFF, addr >> 32, value]


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--packets", type=int, default=20000)
  ap.add_argument("--copy-mib", type=int, default=64)
  ap.add_argument("--repeat", type=int, default=3)
  args = ap.parse_args(argv)
  from hcq.mockgpu import mock_amd_os
  from hcq.mockgpu.amd.queues import COMPUTE, SDMA
  os = mock_amd_os()
  gpu = os.devices[0].gpus[0]
  ring_bytes = 1 << 22
  n_words = 5 * args.packets
  assert 4 * n_words <= ring_bytes, "--packets too large for the 4 MiB ring"
  copy = args.copy_mib << 20
  region = os.memory.alloc(ring_bytes + 2 * copy + 0x10000, what="bench region")
  gpu.map_range(region, ring_bytes + 2 * copy + 0x10000)
  ring, src, dst, ptrs = region, region + ring_bytes, region + ring_bytes + copy, region + ring_bytes + 2 * copy

  best_pm4 = best_sdma = float("inf")
  words = (ctypes.c_uint32 * n_words)()
  for i in range(args.packets): words[5 * i:5 * i + 5] = pm4_write_data(ptrs + 64, i)
  for rep in range(args.repeat):
    q = gpu.create_queue(COMPUTE, 100 + rep, ring, ring_bytes, ptrs, ptrs + 8, 0)
    ctypes.memmove(ring, words, 4 * n_words)
    t0 = time.perf_counter()
    gpu.ring_doorbell(q, n_words)
    best_pm4 = min(best_pm4, time.perf_counter() - t0)
    assert ctypes.c_uint32.from_address(ptrs + 64).value == args.packets - 1 and q.error is None
    gpu.destroy_queue(100 + rep)

    q = gpu.create_queue(SDMA, 200 + rep, ring, 1 << 16, ptrs, ptrs + 8, 0)
    n = copy
    pkt = [0x1, n - 1, 0, src & 0xFFFFFFFF, src >> 32, dst & 0xFFFFFFFF, dst >> 32]   # COPY_LINEAR (sdma v6)
    (ctypes.c_uint32 * 7).from_address(ring)[:] = pkt
    t0 = time.perf_counter()
    gpu.ring_doorbell(q, 28)
    best_sdma = min(best_sdma, time.perf_counter() - t0)
    assert q.error is None
    gpu.destroy_queue(200 + rep)

  # doorbell -> RELEASE_MEM interrupt -> WAIT_EVENTS, through the KFD ioctls a driver uses
  from hcq.autogen import kfd
  f = os.open("/dev/kfd", _os.O_RDWR)
  ev_page = os.memory.alloc(0x8000, what="event page")
  gpu.map_range(ev_page, 0x8000)
  model = os.devices[0].kfd
  model.event_page = ev_page
  ctypes.memset(ev_page, 0xFF, 0x8000)
  ev = kfd.AMDKFD_IOC_CREATE_EVENT(f, event_type=kfd.KFD_IOC_EVENT_SIGNAL, auto_reset=1)
  data = (kfd.struct_kfd_event_data * 1)()
  data[0].event_id = ev.event_id
  mbox = ev_page + 8 * ev.event_slot_index
  q = gpu.create_queue(COMPUTE, 300, ring, 1 << 16, ptrs, ptrs + 8, 0)
  rel = [(3 << 30) | (6 << 16) | (0x49 << 8), 0x514, (1 << 29) | (2 << 24), mbox & 0xFFFFFFFF, mbox >> 32,
         ev.event_id, 0, ev.event_id]
  rounds, put = 200, 0
  t0 = time.perf_counter()
  for _ in range(rounds):
    (ctypes.c_uint32 * 8).from_address(ring + 4 * (put % (1 << 14)))[:] = rel
    put += 8
    gpu.ring_doorbell(q, put)
    r = kfd.AMDKFD_IOC_WAIT_EVENTS(f, events_ptr=ctypes.addressof(data), num_events=1, wait_for_all=0, timeout=1000)
    assert r.wait_result == 0
  rtt = (time.perf_counter() - t0) / rounds
  os.close()

  print(f"PM4: {args.packets} WRITE_DATA packets in {best_pm4 * 1e3:.1f} ms = {args.packets / best_pm4 / 1e3:.0f} k packets/s")
  print(f"SDMA: COPY_LINEAR of {args.copy_mib} MiB in {best_sdma * 1e3:.1f} ms = {copy / best_sdma / 2**30:.2f} GiB/s")
  print(f"doorbell -> RELEASE_MEM interrupt -> WAIT_EVENTS: {rtt * 1e6:.1f} us per round trip ({rounds} rounds)")
  return 0


if __name__ == "__main__":
  raise SystemExit(main())
