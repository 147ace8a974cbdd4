"""The generated bindings agree with gcc on every record, field, bitfield, ioctl number, macro and enum value.

The headers come through the generator's own cache (apt-get download of the pinned packages when missing).
"""
from __future__ import annotations

import ctypes
import importlib
import re
import subprocess

import pytest

from hcq.config import from_env

from . import gcc_truth
generator = importlib.import_module("hcq.autogen.generator")

# module -> headers checked (every record, field, macro and enum constant in them)
TARGETS = ["kfd", "drm", "amdgpu_drm", "vfio", "bnxt", "pci", "amd.discovery", "amd.ucode", "amd.pm4", "amd.pm4_soc15",
           "amd.sdma"]


@pytest.fixture(scope="module")
def roots():
  manifest = generator.load_manifest()
  return manifest, generator.Roots(manifest, from_env().autogen_cache, lambda *a: None)


def target(name, manifest, roots) -> "gcc_truth.Target":
  spec = manifest["modules"][name]
  return gcc_truth.Target(name, [roots.path(h) for h in spec["headers"]], [roots.path(i) for i in spec.get("include", [])],
                          spec.get("defines", {}), spec.get("prelude", ""))


@pytest.mark.tools("gcc")
@pytest.mark.parametrize("name", TARGETS)
def test_generated_module_agrees_with_gcc(name, roots, tmp_path):
  from hcq.autogen.clangparse import resource_dir
  manifest, r = roots
  t = target(name, manifest, r)
  truth, dropped, records = gcc_truth.gcc_truth(t, resource_dir(), str(tmp_path))
  # records the manifest leaves out on purpose (kernel-internal ones, stated there) are not expected
  excluded = set(manifest["modules"][name].get("exclude_records", []))
  truth = {k: v for k, v in truth.items() if k[0] == "M" or k[1] not in excluded}
  module = importlib.import_module(f"hcq.autogen.{name}")
  checked, bad, missing = gcc_truth.compare(module, truth)
  kinds = {k: sum(1 for key in truth if key[0] == k) for k in "SFBM"}
  print(f"{name}: {len(records)} records, {kinds['F']} fields, {kinds['B']} bitfields, {kinds['M']} macro/enum values "
        f"({len(dropped)} macros are no integer constant in C)")
  print(f"{name}: {checked} checked, {len(bad)} mismatched, {len(missing)} missing")
  assert not bad and not missing, "\n".join((bad + missing)[:40])
  assert checked > 0
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


BITFIELD_C = r'''
#include <stdio.h>
#include <string.h>
%(prelude)s
#include "%(header)s"
int main(void) {
%(body)s
  return 0;
}
'''


@pytest.mark.tools("gcc")
def test_bitfields_written_through_ctypes_give_the_bytes_gcc_gives(roots, tmp_path):
  """Every bitfield of discovery.h set to a pattern: the record's bytes from ctypes equal gcc's."""
  from hcq.autogen.amd import discovery
  from hcq.autogen.clangparse import resource_dir
  manifest, r = roots
  t = target("amd.discovery", manifest, r)
  records, _ = gcc_truth.list_declarations(t, resource_dir())
  cases = []
  for py, cn, fields in records:
    for path, kind in fields:
      if kind != "bit": continue
      cases.append((py, cn, path))
  assert len(cases) >= 8, cases
  body = []
  for i, (py, cn, path) in enumerate(cases):
    body.append(f'{{ {cn} v; memset(&v, 0xa5, sizeof v); v.{path} = 0x5; printf("%d ", {i});'
                f' for (size_t k = 0; k < sizeof v; k++) printf("%02x", ((unsigned char *)&v)[k]); printf("\\n"); }}')
  src = tmp_path / "bf.c"
  src.write_text(BITFIELD_C % {"prelude": t.prelude, "header": t.headers[0], "body": "\n".join(body)})
  exe = tmp_path / "bf"
  subprocess.run(["gcc", "-std=gnu11", "-w", *[f"-I{d}" for d in t.include_dirs],
                  *[f"-D{k}={v}" for k, v in t.defines.items()], str(src), "-o", str(exe)], check=True)
  want = dict(line.split() for line in subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.splitlines())
  for i, (py, cn, path) in enumerate(cases):
    cls = getattr(discovery, py)
    obj = cls.from_buffer_copy(b"\xa5" * ctypes.sizeof(cls))
    target_obj, parts = obj, path.split(".")
    for p in parts[:-1]: target_obj = getattr(target_obj, p)
    setattr(target_obj, parts[-1], 0x5)
    assert bytes(obj).hex() == want[str(i)], f"{py}.{path}: ctypes {bytes(obj).hex()} gcc {want[str(i)]}"
