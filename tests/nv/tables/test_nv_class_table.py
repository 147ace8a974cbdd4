"""Compute-class method table: offsets copied from clc7c0.h / clcbc0.h, no two methods at one offset, fields fit."""
from __future__ import annotations

import pytest

from hcq.autogen.nv.tables import classes

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


def test_class_choice_for_hopper_and_ada():
  """GH100's class list (g_gpu_class_list.c, reference §1.8) has c56f/c86f, cbc0, c8b5 but no c9c0/c7c0/c7b5: the
  picks are Hopper's; an AD102-like list picks Ada's."""
  gh100 = [0xC56F, 0xC86F, 0xCBC0, 0xC8B5, 0xC661, 0xA06C, 0x9067, 0x90F1]
  assert classes.pick(classes.COMPUTE_PREFERENCE, gh100) == classes.HOPPER_COMPUTE_A
  assert classes.pick(classes.COPY_PREFERENCE, gh100) == classes.HOPPER_DMA_COPY_A == 0xC8B5
  assert classes.pick(classes.GPFIFO_PREFERENCE, gh100) == classes.HOPPER_CHANNEL_GPFIFO_A
  ad102 = [0xC56F, 0xC9C0, 0xC7B5, 0xC6B5, 0xC561]
  assert (classes.pick(classes.COMPUTE_PREFERENCE, ad102), classes.pick(classes.COPY_PREFERENCE, ad102)) == (0xC9C0, 0xC7B5)
  assert classes.pick(classes.COMPUTE_PREFERENCE, [0x41]) is None
  assert classes.AMPERE_CHANNEL_GPFIFO_A == 0xC56F and classes.AMPERE_DMA_COPY_B == 0xC7B5
