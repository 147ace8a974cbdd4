"""QMD (queue meta data: a compute launch's descriptor) as the mock NV GPU decodes it, per major version: only the
fields a launch needs, with the bit ranges (hi, lo; bit 0 = bit 0 of dword 0) of NVIDIA's open-gpu-doc QMD headers
(V03_00: clc9c0qmd.h, Ampere/Ada, 256 bytes; V04_00: clcbc0qmd.h, Hopper, 384 bytes; V05_00: clcdc0qmd.h, Blackwell,
384 bytes), as autogen/nv/tables/qmd.py tables them with their citations (the table the driver builds QMDs from)."""
from __future__ import annotations

from ...autogen.nv.tables import qmd as _table

# the release semaphores written when the grid completes: V03_00's RELEASE0/1_*, V04_00/V05_00's RELEASE_*_(i) and
# RELEASE_SEMAPHORE(i)_*
_REL3 = tuple(f"RELEASE{i}_{f}" for i in (0, 1) for f in ("ENABLE", "STRUCTURE_SIZE", "PAYLOAD64B", "ADDRESS_LOWER",
                                                         "ADDRESS_UPPER", "PAYLOAD_LOWER", "PAYLOAD_UPPER"))
_REL45 = tuple(f"RELEASE_{f}_{i}" for i in (0, 1) for f in ("ENABLE", "STRUCTURE_SIZE", "PAYLOAD64B")) + \
  tuple(f"RELEASE_SEMAPHORE{i}_{f}" for i in (0, 1) for f in ("ADDR_LOWER", "ADDR_UPPER", "PAYLOAD_LOWER", "PAYLOAD_UPPER"))
STRUCTURE_SIZE = _table.VALUES["RELEASE_STRUCTURE_SIZE"]    # SEMAPHORE_FOUR_WORDS 0, _ONE_WORD 1, _TWO_WORDS 2
# the fields a launch needs, per major version; their bit ranges are the cited table's (the driver's too)
_NEEDED = {
  3: _REL3 + ('SHADER_LOCAL_MEMORY_LOW_SIZE', 'QMD_VERSION', 'QMD_MAJOR_VERSION', 'QMD_GROUP_ID', 'CTA_RASTER_WIDTH', 'CTA_RASTER_HEIGHT', 'CTA_RASTER_DEPTH', 'CTA_THREAD_DIMENSION0', 'CTA_THREAD_DIMENSION1', 'CTA_THREAD_DIMENSION2', 'SHARED_MEMORY_SIZE', 'REGISTER_COUNT_V', 'BARRIER_COUNT', 'PROGRAM_ADDRESS_LOWER', 'PROGRAM_ADDRESS_UPPER', 'SHADER_LOCAL_MEMORY_HIGH_SIZE', 'CONSTANT_BUFFER_ADDR_LOWER_0', 'CONSTANT_BUFFER_ADDR_UPPER_0', 'CONSTANT_BUFFER_SIZE_SHIFTED4_0', 'CONSTANT_BUFFER_VALID_0'),
  4: _REL45 + ('SHADER_LOCAL_MEMORY_HIGH_SIZE', 'QMD_MAJOR_VERSION', 'QMD_TYPE', 'QMD_GROUP_ID', 'GRID_WIDTH', 'GRID_HEIGHT', 'GRID_DEPTH', 'CTA_THREAD_DIMENSION0', 'CTA_THREAD_DIMENSION1', 'CTA_THREAD_DIMENSION2', 'SHARED_MEMORY_SIZE', 'REGISTER_COUNT', 'BARRIER_COUNT', 'PROGRAM_ADDRESS_LOWER', 'PROGRAM_ADDRESS_UPPER', 'SHADER_LOCAL_MEMORY_LOW_SIZE', 'CONSTANT_BUFFER_ADDR_LOWER_SHIFTED6_0', 'CONSTANT_BUFFER_ADDR_UPPER_SHIFTED6_0', 'CONSTANT_BUFFER_SIZE_SHIFTED4_0', 'CONSTANT_BUFFER_VALID_0'),
  5: _REL45 + ('SHADER_LOCAL_MEMORY_HIGH_SIZE_SHIFTED4', 'QMD_MAJOR_VERSION', 'QMD_TYPE', 'QMD_GROUP_ID', 'GRID_WIDTH', 'GRID_HEIGHT', 'GRID_DEPTH', 'CTA_THREAD_DIMENSION0', 'CTA_THREAD_DIMENSION1', 'CTA_THREAD_DIMENSION2', 'SHARED_MEMORY_SIZE_SHIFTED7', 'REGISTER_COUNT', 'BARRIER_COUNT', 'PROGRAM_ADDRESS_LOWER_SHIFTED4', 'PROGRAM_ADDRESS_UPPER_SHIFTED4', 'SHADER_LOCAL_MEMORY_LOW_SIZE_SHIFTED4', 'CONSTANT_BUFFER_ADDR_LOWER_SHIFTED6_0', 'CONSTANT_BUFFER_ADDR_UPPER_SHIFTED6_0', 'CONSTANT_BUFFER_SIZE_SHIFTED4_0', 'CONSTANT_BUFFER_VALID_0'),
}
LAYOUTS = {major: ({name: _table.for_major(major)[name] for name in fields}, _table.for_major(major).size_bytes)
           for major, fields in _NEEDED.items()}
V3, V4, V5 = (LAYOUTS[m][0] for m in (3, 4, 5))


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
  buffer 0 (address, size, valid), shared memory bytes, register count, the local memory windows' sizes (bytes per
  thread), the enabled release semaphores (enable, structure size, 64-bit payload, address, payload)."""
  if major == 3:
    regs, local_high, local_low = q["REGISTER_COUNT_V"], q["SHADER_LOCAL_MEMORY_HIGH_SIZE"], q["SHADER_LOCAL_MEMORY_LOW_SIZE"]
    releases = [(q[f"RELEASE{i}_ENABLE"], q[f"RELEASE{i}_STRUCTURE_SIZE"], q[f"RELEASE{i}_PAYLOAD64B"],
                 q[f"RELEASE{i}_ADDRESS_LOWER"] | q[f"RELEASE{i}_ADDRESS_UPPER"] << 32,
                 q[f"RELEASE{i}_PAYLOAD_LOWER"] | q[f"RELEASE{i}_PAYLOAD_UPPER"] << 32) for i in (0, 1)]
    grid = (q["CTA_RASTER_WIDTH"], q["CTA_RASTER_HEIGHT"], q["CTA_RASTER_DEPTH"])
    cb0, pc, shared = q["CONSTANT_BUFFER_ADDR_LOWER_0"] | q["CONSTANT_BUFFER_ADDR_UPPER_0"] << 32, \
      q["PROGRAM_ADDRESS_LOWER"] | q["PROGRAM_ADDRESS_UPPER"] << 32, q["SHARED_MEMORY_SIZE"]
  else:
    regs, local_low = q["REGISTER_COUNT"], None
    local_high = q["SHADER_LOCAL_MEMORY_HIGH_SIZE"] if major == 4 else q["SHADER_LOCAL_MEMORY_HIGH_SIZE_SHIFTED4"] << 4
    releases = [(q[f"RELEASE_ENABLE_{i}"], q[f"RELEASE_STRUCTURE_SIZE_{i}"], q[f"RELEASE_PAYLOAD64B_{i}"],
                 q[f"RELEASE_SEMAPHORE{i}_ADDR_LOWER"] | q[f"RELEASE_SEMAPHORE{i}_ADDR_UPPER"] << 32,
                 q[f"RELEASE_SEMAPHORE{i}_PAYLOAD_LOWER"] | q[f"RELEASE_SEMAPHORE{i}_PAYLOAD_UPPER"] << 32) for i in (0, 1)]
    grid = (q["GRID_WIDTH"], q["GRID_HEIGHT"], q["GRID_DEPTH"])
    cb0 = (q["CONSTANT_BUFFER_ADDR_LOWER_SHIFTED6_0"] | q["CONSTANT_BUFFER_ADDR_UPPER_SHIFTED6_0"] << 32) << 6
    if major == 4: pc, shared = q["PROGRAM_ADDRESS_LOWER"] | q["PROGRAM_ADDRESS_UPPER"] << 32, q["SHARED_MEMORY_SIZE"]
    else:
      pc = (q["PROGRAM_ADDRESS_LOWER_SHIFTED4"] | q["PROGRAM_ADDRESS_UPPER_SHIFTED4"] << 32) << 4
      shared = q["SHARED_MEMORY_SIZE_SHIFTED7"] << 7
  return {"grid": grid, "block": (q["CTA_THREAD_DIMENSION0"], q["CTA_THREAD_DIMENSION1"], q["CTA_THREAD_DIMENSION2"]),
          "pc": pc, "cb0": cb0, "cb0_size": q["CONSTANT_BUFFER_SIZE_SHIFTED4_0"] << 4,
          "cb0_valid": q["CONSTANT_BUFFER_VALID_0"], "shared": shared, "registers": regs, "local_high": local_high,
          "local_low": local_low, "releases": [r for r in releases if r[0]]}


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


# ---- the QMD's release semaphores, written when the grid completes (minimal: QMD V03_00, clc9c0qmd.h
# NVC9C0_QMDV03_00_RELEASE{0,1}_*: ENABLE, ADDRESS_LOWER/UPPER, PAYLOAD_LOWER/UPPER, PAYLOAD64B, STRUCTURE_SIZE
# (SEMAPHORE_FOUR_WORDS 0: payload then a 64-bit timestamp at +8; ONE_WORD 1; TWO_WORDS 2), REDUCTION_ENABLE).
# Hopper's and Blackwell's RELEASE_SEMAPHORE*_ fields are the NV SM model's to add.
_RELEASE_FIELDS = ("ENABLE", "ADDRESS_LOWER", "ADDRESS_UPPER", "PAYLOAD_LOWER", "PAYLOAD_UPPER", "PAYLOAD64B",
                   "STRUCTURE_SIZE", "REDUCTION_ENABLE")
RELEASE_V3 = [{f: _table.for_major(3)[f"RELEASE{i}_{f}"] for f in _RELEASE_FIELDS} for i in (0, 1)]
FOUR_WORDS, ONE_WORD, TWO_WORDS = 0, 1, 2


def releases(major: int, data) -> list[dict]:
  """The enabled release semaphores of a QMD (decoded fields of each), in order; [] for majors not modelled here."""
  if major != 3: return []
  out = []
  for layout in RELEASE_V3:
    r = decode(layout, data)
    if r["ENABLE"]: out.append(r)
  return out
