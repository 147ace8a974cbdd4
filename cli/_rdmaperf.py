"""Figures of `hcq rdma` runs as perftest prints them (ib_write_bw / ib_write_lat, linux-rdma/perftest): one row per
message size with bytes, iterations, average bandwidth in Gb/s, message rate in Mpps and the latency of one write
(min, average, 99th percentile, microseconds). `--sweep` is ib_write_bw -a's range: 2 B to 64 MiB by powers of 2."""
from __future__ import annotations

import math
import time

SWEEP_MIN, SWEEP_MAX = 2, 64 << 20
COLUMNS = (("bytes", "#bytes", "d"), ("iterations", "#iterations", "d"), ("bw_gbps", "BW average[Gb/s]", ".3f"),
           ("msg_rate_mpps", "MsgRate[Mpps]", ".6f"), ("lat_min_us", "t_min[usec]", ".2f"),
           ("lat_avg_us", "t_avg[usec]", ".2f"), ("lat_p99_us", "t_p99[usec]", ".2f"))


def sweep_sizes(largest: int = SWEEP_MAX) -> list[int]:
  """2, 4, 8, ... up to largest (64 MiB unless a smaller bound is given)."""
  out, n = [], SWEEP_MIN
  while n <= largest:
    out.append(n)
    n *= 2
  return out


def percentile(sorted_values: list[float], p: float) -> float:
  """The nearest-rank percentile (the smallest value with at least p% of the values at or below it)."""
  rank = max(1, math.ceil(p / 100 * len(sorted_values)))
  return sorted_values[rank - 1]


def measure(write, size: int, iters: int, clock=time.perf_counter) -> dict:
  """Run write() iters times, timing each (the host's clock around the post and its completion); one row."""
  times = []
  for _ in range(iters):
    t0 = clock()
    write()
    times.append(clock() - t0)
  total = sum(times)
  ts = sorted(times)
  return {"bytes": size, "iterations": iters,
          "bw_gbps": size * 8 * iters / total / 1e9 if total > 0 else math.inf,
          "msg_rate_mpps": iters / total / 1e6 if total > 0 else math.inf,
          "lat_min_us": ts[0] * 1e6, "lat_avg_us": total / iters * 1e6, "lat_p99_us": percentile(ts, 99) * 1e6}


def table(rows: list[dict]) -> str:
  widths = [max(len(head), 12) for _, head, _ in COLUMNS]
  lines = [" ".join(head.rjust(w) for (_, head, _), w in zip(COLUMNS, widths))]
  for r in rows: lines.append(" ".join(format(r[k], f).rjust(w) for (k, _, f), w in zip(COLUMNS, widths)))
  return "\n".join(lines)
