"""The QMD layouts: consistent as data (no field overlaps another, each fits the QMD, widths match what the names
say), facts spot-checked against the open-gpu-doc headers they were copied from, and encode/decode round trips."""
from __future__ import annotations

import random

import pytest

from hcq.autogen.nv.tables import classes, qmd

LAYOUTS = [qmd.V3, qmd.V4, qmd.V5]


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda l: l.name)
def test_no_field_overlaps_another_and_all_fit_the_qmd(layout):
  spans = sorted((lo, hi, name) for name, (hi, lo) in layout.items())
  for (lo1, hi1, a), (lo2, hi2, b) in zip(spans, spans[1:]):
    assert lo2 > hi1, f"{layout.name}: {a} {hi1}:{lo1} overlaps {b} {hi2}:{lo2}"
  assert all(0 <= lo <= hi < layout.size_bytes * 8 for hi, lo in layout.values())
  assert layout.size_bytes == qmd.SIZE_BYTES[layout.major]


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda l: l.name)
def test_widths_match_the_names(layout):
  """*_ADDRESS_LOWER / *_PAYLOAD_* / *_POINTER are whole dwords on a dword boundary; a *_ENABLE / *_VALID flag one bit;
  the major version sits right above the minor version, 4 bits each."""
  for name, (hi, lo) in layout.items():
    width = hi - lo + 1
    if name.endswith(("ADDRESS_LOWER", "ADDR_LOWER", "PAYLOAD_LOWER", "PAYLOAD_UPPER", "_POINTER", "ADDR_LOWER_SHIFTED6",
                      "ADDRESS_LOWER_SHIFTED4")) or "ADDR_LOWER_SHIFTED6_" in name or "ADDR_LOWER_" in name:
      assert width == 32 and lo % 32 == 0, (layout.name, name, hi, lo)
    if name.endswith(("_ENABLE", "_PREFETCH")) or "_VALID_" in name or name.endswith("_VALID"):
      assert width == 1 or name.startswith("CONSTANT_BUFFER_PREFETCH"), (layout.name, name, hi, lo)
  minor = layout.get("QMD_VERSION") or layout["QMD_MINOR_VERSION"]
  major = layout["QMD_MAJOR_VERSION"]
  assert major[1] == minor[0] + 1 and major[0] - major[1] == 3 and minor[0] - minor[1] == 3


def test_facts_copied_from_the_headers():
  """A few ranges read off clc9c0qmd.h (V03_00), clcbc0qmd.h (V04_00) and clcdc0qmd.h (V05_00)."""
  assert qmd.V3["CTA_RASTER_WIDTH"] == (415, 384) and qmd.V3["QMD_MAJOR_VERSION"] == (583, 580)
  assert qmd.V3["CONSTANT_BUFFER_ADDR_LOWER_3"] == (1055 + 3 * 64, 1024 + 3 * 64)
  assert qmd.V3["CONSTANT_BUFFER_VALID_7"] == (647, 647) and qmd.V3["REGISTER_COUNT_V"] == (656, 648)
  assert qmd.V3["RELEASE0_ENABLE"] == (823, 823) and qmd.V3["SASS_VERSION"] == (1663, 1656)
  assert qmd.V4["QMD_TYPE"] == (25, 23) and qmd.V4["GRID_WIDTH"] == (1055, 1024)
  assert qmd.V4["RELEASE_ENABLE_1"] == (336, 336) and qmd.V4["CONSTANT_BUFFER_VALID_2"] == (424, 424)
  assert qmd.V4["CONSTANT_BUFFER_SIZE_SHIFTED4_1"] == (1663, 1651) and qmd.V4["TPC_DISABLE_MASK_17"] == (3007, 2976)
  assert qmd.V5["PROGRAM_ADDRESS_UPPER_SHIFTED4"] == (1076, 1056) and qmd.V5["SHARED_MEMORY_SIZE_SHIFTED7"] == (1162, 1152)
  assert qmd.V5["CONSTANT_BUFFER_VALID_0"] == (1856, 1856) and qmd.V5["QMD_MAJOR_VERSION"] == (471, 468)


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda l: l.name)
def test_encode_decode_round_trip(layout):
  rng = random.Random(layout.major)
  fields = {name: rng.randrange(1 << (hi - lo + 1)) for name, (hi, lo) in layout.items()}
  data = qmd.encode(layout, **fields)
  assert len(data) == layout.size_bytes
  assert qmd.decode(layout, data) == fields
  assert all(qmd.get(layout, data, n) == v for n, v in fields.items())
  # one field changed in place leaves the others as they were
  name = rng.choice(sorted(fields))
  hi, lo = layout[name]
  patched = qmd.update(layout, data, **{name: 0})
  assert qmd.decode(layout, patched) == {**fields, name: 0}


def test_encode_places_bits_where_the_header_says():
  data = qmd.encode(qmd.V3, QMD_MAJOR_VERSION=3, CTA_RASTER_WIDTH=0x12345678, CTA_THREAD_DIMENSION0=256)
  words = [int.from_bytes(data[i:i + 4], "little") for i in range(0, len(data), 4)]
  # dword 18 holds bits 576..607: the major version at 583:580 and CTA_THREAD_DIMENSION0 at 607:592
  assert words[18] == (3 << 4) | (256 << 16) and words[12] == 0x12345678
  assert sum(1 for w in words if w) == 2


def test_bad_fields_and_values_are_refused_naming_them():
  with pytest.raises(qmd.QMDError, match="QMDV04_00 has no field 'CTA_RASTER_WIDTH'"):
    qmd.encode(qmd.V4, CTA_RASTER_WIDTH=1)
  with pytest.raises(qmd.QMDError, match=r"QMDV03_00.QMD_GROUP_ID is 6 bits \(133:128\): 0x40 does not fit"):
    qmd.encode(qmd.V3, QMD_GROUP_ID=64)
  with pytest.raises(qmd.QMDError, match="-0x1 does not fit"):
    qmd.encode(qmd.V5, GRID_WIDTH=-1)
  with pytest.raises(qmd.QMDError, match="100 bytes given, the QMD is 384"):
    qmd.decode(qmd.V4, bytes(100))
  with pytest.raises(qmd.QMDError, match="major version 2"):
    qmd.for_major(2)


def test_every_compute_class_has_a_qmd_layout():
  for cls, major in classes.QMD_MAJOR.items():
    assert qmd.for_major(major).major == major, classes.COMPUTE_NAMES[cls]
  assert classes.QMD_MAJOR[classes.HOPPER_COMPUTE_A] == 4 and classes.QMD_MAJOR[classes.ADA_COMPUTE_A] == 3
