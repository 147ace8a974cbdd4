"""QMD (queue meta data: a compute launch's descriptor) as the mock NV GPU decodes it, per major version: only the
fields a launch needs, with the bit ranges (hi, lo; bit 0 = bit 0 of dword 0) of NVIDIA's open-gpu-doc QMD headers
(V03_00: clc9c0qmd.h, Ampere/Ada, 256 bytes; V04_00: clcbc0qmd.h, Hopper, 384 bytes; V05_00: clcdc0qmd.h, Blackwell,
384 bytes), as drivers/nv/tables/qmd.py tables them with their citations. The mock may not import the driver:
tests/nv/test_mock_facts.py holds every range here equal to that table."""
from __future__ import annotations

V3 = {
  "QMD_VERSION": (579, 576), "QMD_MAJOR_VERSION": (583, 580), "QMD_GROUP_ID": (133, 128),
  "CTA_RASTER_WIDTH": (415, 384), "CTA_RASTER_HEIGHT": (431, 416), "CTA_RASTER_DEPTH": (463, 448),
  "CTA_THREAD_DIMENSION0": (607, 592), "CTA_THREAD_DIMENSION1": (623, 608), "CTA_THREAD_DIMENSION2": (639, 624),
  "SHARED_MEMORY_SIZE": (561, 544), "REGISTER_COUNT_V": (656, 648), "BARRIER_COUNT": (767, 763),
  "PROGRAM_ADDRESS_LOWER": (1567, 1536), "PROGRAM_ADDRESS_UPPER": (1584, 1568),
  "SHADER_LOCAL_MEMORY_HIGH_SIZE": (1623, 1600), "CONSTANT_BUFFER_ADDR_LOWER_0": (1055, 1024),
  "CONSTANT_BUFFER_ADDR_UPPER_0": (1072, 1056), "CONSTANT_BUFFER_SIZE_SHIFTED4_0": (1087, 1075),
  "CONSTANT_BUFFER_VALID_0": (640, 640),
}
V3_SIZE = 256
V4 = {
  "QMD_MAJOR_VERSION": (583, 580), "QMD_TYPE": (25, 23), "QMD_GROUP_ID": (21, 16), "GRID_WIDTH": (1055, 1024),
  "GRID_HEIGHT": (1071, 1056), "GRID_DEPTH": (1103, 1088), "CTA_THREAD_DIMENSION0": (1167, 1152),
  "CTA_THREAD_DIMENSION1": (1183, 1168), "CTA_THREAD_DIMENSION2": (1199, 1184), "SHARED_MEMORY_SIZE": (601, 584),
  "REGISTER_COUNT": (1208, 1200), "BARRIER_COUNT": (1215, 1211), "PROGRAM_ADDRESS_LOWER": (1247, 1216),
  "PROGRAM_ADDRESS_UPPER": (1272, 1248), "SHADER_LOCAL_MEMORY_LOW_SIZE": (535, 512),
  "CONSTANT_BUFFER_ADDR_LOWER_SHIFTED6_0": (1567, 1536), "CONSTANT_BUFFER_ADDR_UPPER_SHIFTED6_0": (1586, 1568),
  "CONSTANT_BUFFER_SIZE_SHIFTED4_0": (1599, 1587), "CONSTANT_BUFFER_VALID_0": (416, 416),
}
V4_SIZE = 384
V5 = {
  "QMD_MAJOR_VERSION": (471, 468), "QMD_TYPE": (153, 151), "QMD_GROUP_ID": (149, 144), "GRID_WIDTH": (1279, 1248),
  "GRID_HEIGHT": (1295, 1280), "GRID_DEPTH": (1327, 1312), "CTA_THREAD_DIMENSION0": (1103, 1088),
  "CTA_THREAD_DIMENSION1": (1119, 1104), "CTA_THREAD_DIMENSION2": (1127, 1120),
  "SHARED_MEMORY_SIZE_SHIFTED7": (1162, 1152), "REGISTER_COUNT": (1136, 1128), "BARRIER_COUNT": (1141, 1137),
  "PROGRAM_ADDRESS_LOWER_SHIFTED4": (1055, 1024), "PROGRAM_ADDRESS_UPPER_SHIFTED4": (1076, 1056),
  "SHADER_LOCAL_MEMORY_LOW_SIZE_SHIFTED4": (1199, 1184), "CONSTANT_BUFFER_ADDR_LOWER_SHIFTED6_0": (1375, 1344),
  "CONSTANT_BUFFER_ADDR_UPPER_SHIFTED6_0": (1394, 1376), "CONSTANT_BUFFER_SIZE_SHIFTED4_0": (1407, 1395),
  "CONSTANT_BUFFER_VALID_0": (1856, 1856),
}
V5_SIZE = 384
LAYOUTS = {3: (V3, V3_SIZE), 4: (V4, V4_SIZE), 5: (V5, V5_SIZE)}


def _extractors(layout: dict) -> tuple:
  """(name, first dword, shift, mask, two dwords) per field: a field spans at most two dwords."""
  out = []
  for name, (hi, lo) in layout.items():
    first = lo // 32
    out.append((name, first, lo - 32 * first, (1 << (hi - lo + 1)) - 1, hi // 32 > first))
  return tuple(out)


_EXTRACTORS: dict = {}


def decode(layout: dict, data) -> dict:
  """The layout's fields from a QMD given as bytes or a u32 sequence."""
  ex = _EXTRACTORS.get(id(layout))
  if ex is None: ex = _EXTRACTORS[id(layout)] = _extractors(layout)
  w = memoryview(data).cast("I") if isinstance(data, (bytes, bytearray)) else data
  out = {}
  for name, first, shift, mask, two in ex:
    v = w[first] | (w[first + 1] << 32) if two else w[first]
    out[name] = (v >> shift) & mask
  return out


def launch(major: int, q: dict) -> dict:
  """What a launch needs, in plain units, from a decoded QMD of `major`: grid, block, program address, constant
  buffer 0 (address, size, valid), shared memory bytes."""
  if major == 3:
    grid = (q["CTA_RASTER_WIDTH"], q["CTA_RASTER_HEIGHT"], q["CTA_RASTER_DEPTH"])
    cb0, pc, shared = q["CONSTANT_BUFFER_ADDR_LOWER_0"] | q["CONSTANT_BUFFER_ADDR_UPPER_0"] << 32, \
      q["PROGRAM_ADDRESS_LOWER"] | q["PROGRAM_ADDRESS_UPPER"] << 32, q["SHARED_MEMORY_SIZE"]
  else:
    grid = (q["GRID_WIDTH"], q["GRID_HEIGHT"], q["GRID_DEPTH"])
    cb0 = (q["CONSTANT_BUFFER_ADDR_LOWER_SHIFTED6_0"] | q["CONSTANT_BUFFER_ADDR_UPPER_SHIFTED6_0"] << 32) << 6
    if major == 4: pc, shared = q["PROGRAM_ADDRESS_LOWER"] | q["PROGRAM_ADDRESS_UPPER"] << 32, q["SHARED_MEMORY_SIZE"]
    else:
      pc = (q["PROGRAM_ADDRESS_LOWER_SHIFTED4"] | q["PROGRAM_ADDRESS_UPPER_SHIFTED4"] << 32) << 4
      shared = q["SHARED_MEMORY_SIZE_SHIFTED7"] << 7
  return {"grid": grid, "block": (q["CTA_THREAD_DIMENSION0"], q["CTA_THREAD_DIMENSION1"], q["CTA_THREAD_DIMENSION2"]),
          "pc": pc, "cb0": cb0, "cb0_size": q["CONSTANT_BUFFER_SIZE_SHIFTED4_0"] << 4,
          "cb0_valid": q["CONSTANT_BUFFER_VALID_0"], "shared": shared}


def _cb0_address_dword(layout: dict, lower: str, upper: str) -> int:
  (lhi, llo), (uhi, ulo) = layout[lower], layout[upper]
  assert llo % 32 == 0 and lhi == llo + 31 and ulo == llo + 32, (lower, upper)   # a dword, then the next one's low bits
  return llo // 32


# constant buffer 0's address: (its low dword's index, the shift of the address), and the upper field's mask
CB0_ADDR_DWORD = {3: (_cb0_address_dword(V3, "CONSTANT_BUFFER_ADDR_LOWER_0", "CONSTANT_BUFFER_ADDR_UPPER_0"), 0),
                  4: (_cb0_address_dword(V4, "CONSTANT_BUFFER_ADDR_LOWER_SHIFTED6_0", "CONSTANT_BUFFER_ADDR_UPPER_SHIFTED6_0"), 6),
                  5: (_cb0_address_dword(V5, "CONSTANT_BUFFER_ADDR_LOWER_SHIFTED6_0", "CONSTANT_BUFFER_ADDR_UPPER_SHIFTED6_0"), 6)}
CB0_UPPER_MASK = {3: (1 << (V3["CONSTANT_BUFFER_ADDR_UPPER_0"][0] - V3["CONSTANT_BUFFER_ADDR_UPPER_0"][1] + 1)) - 1,
                  4: (1 << (V4["CONSTANT_BUFFER_ADDR_UPPER_SHIFTED6_0"][0] - V4["CONSTANT_BUFFER_ADDR_UPPER_SHIFTED6_0"][1] + 1)) - 1,
                  5: (1 << (V5["CONSTANT_BUFFER_ADDR_UPPER_SHIFTED6_0"][0] - V5["CONSTANT_BUFFER_ADDR_UPPER_SHIFTED6_0"][1] + 1)) - 1}
