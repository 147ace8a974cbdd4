"""The Adreno device table (autogen/fddevices.py: Mesa's src/freedreno/common/freedreno_devices.py read with ast) and
its lookup (autogen/runtime_devices.py: Mesa's fd_dev_info_raw / dev_id_compare in freedreno_dev_info.c)."""
from __future__ import annotations

import importlib
import textwrap

import pytest

from hcq.autogen import fddevices
from hcq.autogen.qcom.devices import DEVICES
from hcq.autogen.runtime_devices import Devices
from hcq.config import from_env

generator = importlib.import_module("hcq.autogen.generator")

SCRIPT = textwrap.dedent("""
  from enum import Enum
  class CHIP(Enum):
      A6XX = 6
      A7XX = 7
  add_gpus([
          GPUId(630),
          GPUId(chip_id=0xffff06030500, name="Adreno 7c+ Gen 3"),
      ], A6xxGPUInfo(CHIP.A6XX, [a6xx_base], num_ccu = 2 * 1))
  add_gpus([
          GPUId(chip_id=0x43050a01, name="FD740"), # KGSL
      ], A6xxGPUInfo(CHIP.A7XX, []))
""")


def test_the_script_is_read_as_mesa_runs_it(tmp_path):
  p = tmp_path / "freedreno_devices.py"
  p.write_text(SCRIPT)
  # GPUId(630): chip id from the digits with a 0xff patch wildcard, name FD630 (GPUId.__init__)
  assert fddevices.read(str(p)) == [(0x060300FF, 630, "FD630", 6), (0xFFFF06030500, 0, "Adreno 7c+ Gen 3", 6),
                                    (0x43050A01, 0, "FD740", 7)]
  p.write_text(SCRIPT.replace("CHIP.A7XX", "CHIP.A9XX"))
  with pytest.raises(fddevices.DevicesError, match="not a CHIP value"): fddevices.read(str(p))


def test_lookup_follows_dev_id_compare():
  d = Devices([(0x060300FF, 630, "FD630", 6), (0xFFFF06030500, 0, "Adreno 7c+ Gen 3", 6), (0x43050A01, 0, "FD740", 7)])
  assert d.lookup(0x06030001).name == "FD630"                  # (b) patch 0xff is a wildcard
  assert d.lookup(0, gpu_id=630).name == "FD630"               # both have a gpu id: it decides
  assert d.lookup(0x06030001, gpu_id=640) is None              # ... even when the chip id would match
  assert d.lookup(0x43050A01).marketing == "a740"              # (a) exact
  assert d.lookup(0x43050A02) is None
  assert d.lookup(0x1234_06030500).name == "Adreno 7c+ Gen 3"  # (c) any fuse id against a wildcard fuse id
  assert d.lookup(0) is None


def test_the_generated_table_knows_a630_a730_a740():
  got = {c: (DEVICES.lookup(c).marketing, DEVICES.lookup(c).generation) for c in (0x06030001, 0x07030001, 0x43050A01)}
  assert got == {0x06030001: ("a630", 6), 0x07030001: ("a730", 7), 0x43050A01: ("a740", 7)}


def test_the_generated_table_is_the_pinned_files():
  manifest = generator.load_manifest()
  roots = generator.Roots(manifest, from_env().autogen_cache, lambda *a: None)
  try: path = roots.path(manifest["modules"]["qcom.devices"]["path"])
  except Exception as e: pytest.skip(f"the Mesa source package is not available here: {e}")
  assert [tuple(vars(d).values()) for d in DEVICES] == fddevices.read(path)
