"""Which way a copy between the host and VRAM crosses the USB bridge, picked by measurement (issue 33: "USB copies:
pick the cheaper path by measurement").

Both paths move every byte over the USB link once: "sram" bounces it through the bridge's SRAM (usbstaging.py's
SRAMStaging: DMA-engine writes and reads, fence polls, the GPU's SDMA copies), "bar" streams it through the VRAM BAR
(tlpmmio.py: one vendor request and one bulk transfer per 4 MiB). What differs is the number of round trips around
the data, the host's waits for the bridge (~100 us each on hardware, asm24.py): one per synchronous transfer, one per
wait for the transfers in flight (usbpipeline.py), so the cheaper path is the one that waits less. The first copy of
a direction that is large enough is the measurement: its first PROBE bytes go through each path in turn, the round
trips each took are counted on the bridge (the driver's own tally, ASM24Bridge.round_trips), and that copy's rest and
every later copy of that direction take the path that took fewer (ties: the first listed). Smaller copies before then
take the first path. The measured counts stay in `costs` (bench/usb.py --launch prints them).
"""
from __future__ import annotations

PROBE = 64 << 10        # bytes measured per path: one SRAM chunk, one BAR request (small: the measurement costs
                        # its round trips once, 13 on the mock: 9 for the SRAM's, 4 for the BAR's)


class CheaperPath:
  """Per direction ("in", "out"), the path of `paths` that costs less, measured on the first copy of at least
  len(paths) * PROBE bytes. count() -> the bridge's cost so far (its round trips)."""

  def __init__(self, count, paths: tuple[str, ...] = ("sram", "bar"), probe: int = PROBE):
    self.count, self.paths, self.probe = count, paths, probe
    self.costs: dict[str, dict[str, int]] = {}      # direction -> path -> round trips of its probe
    self.choice: dict[str, str] = {}                # direction -> the path measured cheaper

  def run(self, direction: str, size: int, copy) -> list:
    """Copy `size` bytes: copy(path, offset, n) moves bytes offset..offset+n by `path` (returns what it read, or
    None); returns copy()'s results in order."""
    chosen = self.choice.get(direction)
    if chosen is not None or size < self.probe * len(self.paths): return [copy(chosen or self.paths[0], 0, size)]
    out, costs = [], {}
    for i, path in enumerate(self.paths):
      before = self.count()
      out.append(copy(path, i * self.probe, self.probe))
      costs[path] = self.count() - before
    self.costs[direction] = costs
    chosen = self.choice[direction] = min(self.paths, key=lambda p: costs[p])     # min keeps the first of a tie
    done = self.probe * len(self.paths)
    if size > done: out.append(copy(chosen, done, size - done))
    return out
