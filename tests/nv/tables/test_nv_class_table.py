"""Compute-class method table: offsets copied from clc7c0.h / clcbc0.h, no two methods at one offset, fields fit."""
from __future__ import annotations

import pytest

from hcq.drivers.nv.tables import classes

M = classes.ComputeMethods


def test_launch_and_window_methods_are_where_the_class_headers_put_them():
  assert (M.SET_OBJECT, M.SEND_PCAS_A, M.SEND_SIGNALING_PCAS2_B) == (0x0, 0x2B4, 0x2C0)
  assert (M.SET_SHADER_SHARED_MEMORY_WINDOW_A, M.SET_SHADER_LOCAL_MEMORY_WINDOW_A, M.SET_SHADER_LOCAL_MEMORY_A) == \
    (0x2A0, 0x7B0, 0x790)
  assert (M.INVALIDATE_SHADER_CACHES_NO_WFI, M.SET_REPORT_SEMAPHORE_A, M.LOAD_INLINE_QMD_DATA(2)) == (0x1698, 0x1B00, 0x328)
  assert classes.PCAS_ACTION["PREFETCH_SCHEDULE"] == 9


def test_methods_are_distinct_dword_offsets_and_names_round_trip():
  names = classes.compute_method_names()
  offsets = [v for k, v in vars(M).items() if k.isupper() and isinstance(v, int)]
  assert len(offsets) == len(set(offsets)) and all(o % 4 == 0 and o < 0x4000 for o in offsets)
  assert names[0x2B4] == "SEND_PCAS_A" and names[0x324] == "LOAD_INLINE_QMD_DATA_1"


def test_fields_do_not_overlap_within_a_method():
  for method, fields in classes.FIELDS.items():
    spans = sorted((lo, hi) for hi, lo in fields.values())
    assert all(b[0] > a[1] for a, b in zip(spans, spans[1:])), method
    assert all(0 <= lo <= hi < 32 for lo, hi in spans), method


def test_field_places_and_checks_values():
  assert classes.field("SET_OBJECT", "ENGINE_ID", 1) == 1 << 16
  assert classes.field("INVALIDATE_SHADER_CACHES_NO_WFI", "CONSTANT", 1) == 0x1000
  with pytest.raises(Exception, match="PCAS_ACTION is 4 bits"):
    classes.field("SEND_SIGNALING_PCAS2_B", "PCAS_ACTION", 16)
