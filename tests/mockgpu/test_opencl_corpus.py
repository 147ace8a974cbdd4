"""The shared OpenCL C corpus: fixtures are up to date with their sources, kernels.py agrees with the compiler's
metadata, and every numpy reference runs."""
import os
import subprocess

import numpy as np
import pytest

from tests.fixtures.opencl import build
from tests.fixtures.opencl.kernels import KERNELS, Buffer

SOURCES = [os.path.splitext(os.path.basename(p))[0] for p in build.sources()]


def test_corpus_size_and_one_description_per_source():
  assert len(SOURCES) >= 20
  assert sorted(SOURCES) == sorted(KERNELS)
  for name in SOURCES: assert os.path.exists(KERNELS[name].hsaco_path), f"{name}: run tests/fixtures/opencl/build.py"


def _check_fresh_build(tmp_path, mcpus):
  """Build every source for `mcpus` into tmp_path; each object must be byte-identical to the committed one."""
  build.main(["--out", str(tmp_path), *(f"--mcpu={m}" for m in mcpus)])
  for mcpu in mcpus:
    for name in SOURCES:
      with open(os.path.join(build.out_dir_for(mcpu, str(tmp_path)), f"{name}.hsaco"), "rb") as f: fresh = f.read()
      assert fresh == KERNELS[name].code_object(mcpu), f"{name}.hsaco ({mcpu}) is stale: rerun tests/fixtures/opencl/build.py"


@pytest.mark.tools("clang-19", "ld.lld-19", "llvm-dis-19", "llvm-as-19")
def test_committed_code_objects_match_a_fresh_build(tmp_path):
  """The gfx1100 objects, which most tests run (one build per source, not one per target)."""
  _check_fresh_build(tmp_path, [build.DEFAULT_MCPU])


@pytest.mark.slow
@pytest.mark.tools("clang-19", "ld.lld-19", "llvm-dis-19", "llvm-as-19")
def test_committed_code_objects_of_the_other_targets_match_a_fresh_build(tmp_path):
  _check_fresh_build(tmp_path, [m for m in build.MCPUS if m != build.DEFAULT_MCPU])


def explicit_args_from_notes(name):
  """(value_kind, size) of each non-hidden argument, from llvm-readelf's rendering of the metadata note."""
  text = subprocess.run(["llvm-readelf-19", "--notes", KERNELS[name].hsaco_path], capture_output=True, text=True,
                        check=True).stdout
  args, size = [], None
  for line in text.splitlines():
    line = line.strip().lstrip("- ")
    if line.startswith(".size:"): size = int(line.split(":")[1])
    elif line.startswith(".value_kind:"):
      kind = line.split(":")[1].strip()
      if not kind.startswith("hidden_"): args.append((kind, size))
  return args


@pytest.mark.tools("llvm-readelf-19")
@pytest.mark.parametrize("name", SOURCES)
def test_description_matches_compiler_metadata(name):
  k = KERNELS[name]
  want = [("global_buffer", 8) if isinstance(a, Buffer) else ("by_value", np.dtype(a.dtype).itemsize) for a in k.args]
  assert explicit_args_from_notes(name) == want


@pytest.mark.parametrize("name", SOURCES)
def test_reference_gives_every_output_with_the_right_size(name):
  k = KERNELS[name]
  data = k.inputs(seed=1)
  assert all(isinstance(data[a.name], np.ndarray) for a in k.args if isinstance(a, Buffer))
  expected = k.expected(data)
  assert sorted(expected) == sorted(b.name for b in k.outputs)
  for b in k.outputs: assert np.asarray(expected[b.name]).size == b.count
  assert all(l <= 1024 for l in (np.prod(k.local_size),))


def test_check_reports_the_first_wrong_element():
  k = KERNELS["vadd"]
  data = k.inputs()
  good = k.expected(data)["c"].astype(np.float32)
  k.check({"c": good}, data)
  bad = good.copy()
  bad[77] += 1
  with pytest.raises(AssertionError, match="vadd: buffer c: 1 of 65536 elements differ; first at index 77"):
    k.check({"c": bad.tobytes()}, data)
