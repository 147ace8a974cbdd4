"""What a generated Adreno device table (autogen/fddevices.py -> autogen/qcom/devices.py) needs at import: the devices
and the lookup Mesa does.

    from hcq.autogen.qcom.devices import DEVICES
    DEVICES.lookup(0x07030001)             # Device(chip_id=0x7030001, gpu_id=0, name='FD730', generation=7)
    DEVICES.lookup(0x43050a01).marketing   # 'a740'

lookup follows Mesa 25's fd_dev_info_raw / dev_id_compare (src/freedreno/common/freedreno_dev_info.c): the first
table entry that matches, in table order. When both the entry and the query have a gpu id, the gpu ids decide;
else the chip id matches (a) exactly, (b) with the entry's patch byte 0xff a wildcard (core, major, minor equal),
and, for an entry whose fuse-id bits 47..32 are all ones, (c) and (d): the same with the query's fuse id taken as
all ones.
"""
from __future__ import annotations

from dataclasses import dataclass

WILDCARD_FUSE_ID = 0x0000FFFF00000000   # freedreno_dev_info.c WILDCARD_FUSE_ID


@dataclass(frozen=True)
class Device:
  chip_id: int
  gpu_id: int
  name: str          # Mesa's name: "FD730", "FD740", "FD630", "Adreno 7c+ Gen 3", ...
  generation: int    # CHIP.AnXX: 6 for a6xx, 7 for a7xx

  @property
  def marketing(self) -> str:
    """"a630", "a740" for the FDnnn names (Mesa's FD<gpu id>); other names as Mesa spells them."""
    n = self.name
    return "a" + n[2:] if n.startswith("FD") and n[2:5].isdigit() else n


def _compare(ref: Device, chip_id: int, gpu_id: int) -> bool:
  if ref.gpu_id and gpu_id: return ref.gpu_id == gpu_id
  if not chip_id: return False
  if ref.chip_id == chip_id: return True
  if ref.chip_id & 0xFF == 0xFF and ref.chip_id & 0xFFFFFF00 == chip_id & 0xFFFFFF00: return True
  if ref.chip_id & WILDCARD_FUSE_ID == WILDCARD_FUSE_ID:
    fused = chip_id | WILDCARD_FUSE_ID
    if ref.chip_id == fused: return True
    if ref.chip_id & 0xFF == 0xFF and ref.chip_id & 0xFFFFFF00 == fused & 0xFFFFFF00: return True
  return False


class Devices(tuple):
  def __new__(cls, rows):
    return super().__new__(cls, (Device(*r) for r in rows))

  def lookup(self, chip_id: int, gpu_id: int = 0) -> Device | None:
    """The entry Mesa's fd_dev_info_raw returns for this id (None: Mesa knows no such device)."""
    for d in self:
      if _compare(d, chip_id, gpu_id): return d
    return None
