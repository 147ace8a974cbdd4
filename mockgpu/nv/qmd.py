"""QMD (queue meta data: a compute launch's descriptor) as the mock NV GPU decodes it, per major version.

TEMPORARY, like the driver's table (drivers/nv/qmd.py): bit ranges (hi, lo), bit 0 = bit 0 of dword 0, from
shared/reference/nv_qcom_usb_pci_smi.md section 1.6 (V03: Ampere/Ada, 256 bytes) and 1.8 (V04: Hopper, 384 bytes),
which restate NVIDIA's open-gpu-doc clc6c0qmd.h / clcbc0qmd.h field macros. V05 (Blackwell) has no cited layout here
yet: the nvbind helper's drivers/nv/tables brings it. The mock decodes only the fields a launch needs."""
from __future__ import annotations


def _cbufs(lower, upper, size, valid, n=8, shifted6=False):
  out = {}
  for i in range(n):
    out[f"CONSTANT_BUFFER_ADDR_LOWER_{i}"] = (lower + 64 * i + 31, lower + 64 * i)
    out[f"CONSTANT_BUFFER_ADDR_UPPER_{i}"] = (upper + 64 * i + (18 if shifted6 else 16), upper + 64 * i)
    out[f"CONSTANT_BUFFER_SIZE_SHIFTED4_{i}"] = (size + 64 * i + 12, size + 64 * i)
    out[f"CONSTANT_BUFFER_VALID_{i}"] = (valid(i), valid(i))
  return out


V3 = {"QMD_VERSION": (579, 576), "QMD_MAJOR_VERSION": (583, 580), "QMD_GROUP_ID": (133, 128),
      "CTA_RASTER_WIDTH": (415, 384), "CTA_RASTER_HEIGHT": (431, 416), "CTA_RASTER_DEPTH": (463, 448),
      "CTA_THREAD_DIMENSION0": (607, 592), "CTA_THREAD_DIMENSION1": (623, 608), "CTA_THREAD_DIMENSION2": (639, 624),
      "SHARED_MEMORY_SIZE": (561, 544), "REGISTER_COUNT_V": (656, 648), "BARRIER_COUNT": (767, 763),
      "PROGRAM_ADDRESS_LOWER": (1567, 1536), "PROGRAM_ADDRESS_UPPER": (1584, 1568),
      "SHADER_LOCAL_MEMORY_HIGH_SIZE": (1623, 1600), "SASS_VERSION": (1663, 1656),
      **_cbufs(1024, 1056, 1075, lambda i: 640 + i)}
V3_SIZE = 256
V4 = {"QMD_VERSION": (579, 576), "QMD_MAJOR_VERSION": (583, 580), "QMD_TYPE": (25, 23), "QMD_GROUP_ID": (21, 16),
      "GRID_WIDTH": (1055, 1024), "GRID_HEIGHT": (1071, 1056), "GRID_DEPTH": (1103, 1088),
      "CTA_THREAD_DIMENSION0": (1167, 1152), "CTA_THREAD_DIMENSION1": (1183, 1168), "CTA_THREAD_DIMENSION2": (1199, 1184),
      "SHARED_MEMORY_SIZE": (601, 584), "REGISTER_COUNT": (1208, 1200), "BARRIER_COUNT": (1215, 1211),
      "PROGRAM_ADDRESS_LOWER": (1247, 1216), "PROGRAM_ADDRESS_UPPER": (1272, 1248), "SASS_VERSION": (543, 536),
      "SHADER_LOCAL_MEMORY_LOW_SIZE": (535, 512),
      **_cbufs(1536, 1568, 1587, lambda i: 416 + 4 * i, shifted6=True)}
V4_SIZE = 384
LAYOUTS = {3: (V3, V3_SIZE), 4: (V4, V4_SIZE)}
MAJOR_VERSION = (583, 580)       # where every layout keeps its major version


def field(data: bytes, hi: int, lo: int) -> int:
  return (int.from_bytes(data, "little") >> lo) & ((1 << (hi - lo + 1)) - 1)


def decode(layout: dict, data: bytes) -> dict:
  value = int.from_bytes(data, "little")
  return {name: (value >> lo) & ((1 << (hi - lo + 1)) - 1) for name, (hi, lo) in layout.items()}
