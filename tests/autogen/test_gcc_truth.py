"""The generated bindings agree with gcc on every record, field, bitfield, ioctl number, macro and enum value.

The headers come through the generator's own cache (apt-get download of the pinned packages when missing).
"""
from __future__ import annotations

import importlib
import re
from concurrent.futures import ThreadPoolExecutor

import pytest

from hcq.config import from_env

from . import gcc_truth
generator = importlib.import_module("hcq.autogen.generator")

# module -> headers checked (every record, field, macro and enum constant in them)
TARGETS = ["kfd", "drm", "amdgpu_drm", "vfio", "bnxt", "pci", "amd.discovery", "amd.ucode", "amd.pm4", "amd.pm4_soc15",
           "amd.sdma", "amd.smu_v13_0_0", "amd.psp_gfx_if",
           "nv.nvos", "nv.cl0000", "nv.cl0080", "nv.cl2080", "nv.cl90f1", "nv.alloc_channel", "nv.ctrl0080", "nv.ctrl2080",
           "nv.ctrla06f", "nv.uvm", "nv.ioctl", "nv.nvstatus", "nv.clc56f", "nv.clc86f", "nv.clc6b5", "nv.clc7b5",
           "nv.clc8b5", "qcom.msm_kgsl"]
# the RM and UVM ABI of each supported nvidia.ko series, from NVIDIA's headers at the release tag (git packages: checked
# where those headers are unpacked in the cache or a mirror is named in HCQ_AUTOGEN_GIT, skipped, saying so, elsewhere)
NV_SERIES = ["550", "570", "575", "580", "590"]
TARGETS += [f"nv.{kind}_{s}" for s in NV_SERIES for kind in ("rm", "uvm")]


@pytest.fixture(scope="module")
def roots():
  manifest = generator.load_manifest()
  cfg = from_env()
  return manifest, generator.Roots(manifest, cfg.autogen_cache, lambda *a: None, cfg.autogen_git)


def target(name, manifest, roots) -> "gcc_truth.Target":
  spec = manifest["modules"][name]
  try: [roots.path(h) for h in spec["headers"]]
  except generator.sources.SourceUnavailable as e: pytest.skip(f"{name}: headers not on this machine: {e}")
  return gcc_truth.Target(name, [roots.path(h) for h in spec["headers"]], [roots.path(i) for i in spec.get("include", [])],
                          spec.get("defines", {}), spec.get("prelude", ""))


@pytest.fixture(scope="module")
def truths(request, roots, tmp_path_factory):
  """{name: Future of gcc_truth.gcc_truth(target)} for the targets of the tests selected in this module, worked out
  two at a time: a target's time is mostly gcc's (4-5 compiles of its headers) and libclang's parse, both outside
  Python's lock, so that the check uses both cores of a 2-core machine. A target whose headers are not on this machine
  is left out (its test skips, saying so); a failure is raised by its own test (Future.result())."""
  from hcq.autogen.clangparse import resource_dir
  manifest, r = roots
  here = request.node.path
  names = [item.callspec.params["name"] for item in request.session.items
           if item.path == here and item.originalname == "test_generated_module_agrees_with_gcc"]
  work = tmp_path_factory.mktemp("gcc_truth")

  def one(name, t):
    d = work / name
    d.mkdir()
    return gcc_truth.gcc_truth(t, resource_dir(), str(d))

  futures = {}
  # all of them before the first test goes on: no worker thread outlives the test that set the fixture up
  with ThreadPoolExecutor(2, thread_name_prefix="gcc-truth") as pool:
    for name in names:
      try: t = target(name, manifest, r)
      except (Exception, pytest.skip.Exception): continue     # its test calls target() again: skips or fails there
      futures[name] = pool.submit(one, name, t)
  return futures


@pytest.mark.tools("gcc")
@pytest.mark.parametrize("name", TARGETS)
def test_generated_module_agrees_with_gcc(name, roots, truths):
  manifest, r = roots
  t = target(name, manifest, r)
  truth, verdicts, records = truths[name].result()
  # records the manifest leaves out on purpose (kernel-internal ones, stated there) are not expected
  excluded = set(manifest["modules"][name].get("exclude_records", []))
  truth = {k: v for k, v in truth.items() if k[0] in "MTRX" or k[1] not in excluded}
  module = importlib.import_module(f"hcq.autogen.{name}")
  checked, bad, missing = gcc_truth.compare(module, truth)
  kinds = {k: sum(1 for key in truth if key[0] == k) for k in "SFBMTRX"}
  print(f"{name}: {len(records)} records, {kinds['F']} fields, {kinds['B']} bitfields, {kinds['M']} integer macro/enum "
        f"values, {kinds['T']} string macros, {kinds['R']} hi:lo ranges, {kinds['X']} macros without a value in C")
  print(f"{name}: {checked} checked of gcc's {len(truth)} items, {len(bad)} mismatched, {len(missing)} missing")
  assert not bad and not missing, "\n".join((bad + missing)[:40])
  # every object-like macro of the headers has gcc's verdict and was compared: none is left unchecked
  assert {k[1] for k in truth if k[0] in "MTRX"} >= set(verdicts)
  assert checked == len(truth) > 0
  # every macro defined with _IO/_IOR/_IOW/_IOWR (directly or through DRM_IO*) is an Ioctl object
  ioctl_like = [m.group(1) for h in t.headers for m in
                re.finditer(r"^\s*#\s*define\s+(\w+)(?:[ \t]|\\\n)+\w*_IO(?:R|W|WR)?\s*\(", open(h).read(), re.M)]
  not_objects = [n for n in ioctl_like if not hasattr(getattr(module, n, None), "request")]
  print(f"{name}: {len(ioctl_like)} ioctl macros, {len(not_objects)} not Ioctl objects")
  assert not not_objects, not_objects[:20]


def test_the_big_headers_are_all_there(roots):
  """bnxt_hsi.h + roce_hsi.h: hundreds of records and thousands of macros reach the module."""
  from hcq.autogen import bnxt
  n_records = sum(1 for k in vars(bnxt) if k.startswith(("struct_", "union_")))
  n_ints = sum(1 for v in vars(bnxt).values() if type(v) is int)
  assert n_records > 500 and n_ints > 4800, (n_records, n_ints)


@pytest.mark.tools("gcc")
@pytest.mark.parametrize("name", ["amd.discovery", "amd.psp_gfx_if"])
def test_bitfields_written_through_ctypes_give_the_bytes_gcc_gives(name, roots, tmp_path):
  """Every bitfield of the header set to 5 and to -1 in a record of 0xa5 bytes: ctypes leaves the bytes gcc leaves."""
  from hcq.autogen.clangparse import resource_dir
  manifest, r = roots
  t = target(name, manifest, r)
  records, _ = gcc_truth.list_declarations(t, resource_dir())
  n, bad = gcc_truth.bitfield_bytes(t, importlib.import_module(f"hcq.autogen.{name}"), records, str(tmp_path))
  print(f"{name} bitfields: {n} writes checked, {len(bad)} mismatched")
  assert n >= 6 and not bad, bad
