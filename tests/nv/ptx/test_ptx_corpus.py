"""The CUDA-style corpus (tests/fixtures/cuda): every kernel gives numpy's answer on the PTX interpreter, the
committed PTX is what clang-19 builds from the sources, and NVIDIA's ptxas accepts every file for sm_80 and sm_90."""
from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest

from hcq.config import from_env
from ptx_launch import run_corpus_kernel
from tests.fixtures.cuda import build
from tests.fixtures.cuda.kernels import KERNELS, PTX_DIR

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "backend"))
from ptxas_tool import ToolUnavailable, assemble, ptxas_path  # noqa: E402

NAMES = sorted(KERNELS)


def test_every_source_has_a_reference_and_a_committed_ptx():
  srcs = {os.path.splitext(os.path.basename(s))[0] for s in build.sources()}
  assert srcs == set(KERNELS)
  assert {f[:-4] for f in os.listdir(PTX_DIR) if f.endswith(".ptx")} == srcs


@pytest.mark.parametrize("name", NAMES)
def test_corpus_kernel_gives_numpys_answer(name):
  spec = KERNELS[name]
  outputs, data, stats = run_corpus_kernel(spec, seed=0)
  spec.check(outputs, data)
  assert stats["thread_instructions"] > 0


@pytest.mark.parametrize("name", ["intdiv", "divergent", "atomics", "shuffle", "float_to_int", "bitops"])
def test_corpus_kernel_with_other_inputs(name):
  spec = KERNELS[name]
  outputs, data, _ = run_corpus_kernel(spec, seed=7)
  spec.check(outputs, data)


def test_the_check_catches_a_wrong_result():
  """The comparison fails (naming the buffer and index) when one element is off, so a pass means something."""
  spec = KERNELS["intdiv"]
  outputs, data, _ = run_corpus_kernel(spec)
  outputs["r"][5] += 1
  with pytest.raises(AssertionError, match=r"intdiv\.r\[5\]"): spec.check(outputs, data)


@pytest.mark.tools("clang-19")
def test_committed_ptx_is_what_clang_builds(tmp_path):
  assert build.main(["--out", str(tmp_path)]) == 0
  for name in NAMES:
    built = (tmp_path / f"{name}.ptx").read_text()
    with open(os.path.join(PTX_DIR, f"{name}.ptx")) as f: committed = f.read()
    assert built == committed, f"ptx/{name}.ptx differs from a rebuild: run python3 tests/fixtures/cuda/build.py"


@pytest.mark.slow        # 22 clang-19 builds (~5 s); the -O2 build test above stays in the default suite
@pytest.mark.tools("clang-19")
def test_every_corpus_kernel_built_at_O3_gives_numpys_answer(tmp_path):
  """clang-19 -O3 unrolls and vectorises more than -O2 (the committed PTX): every kernel built that way parses, runs
  and passes the same numpy check, so the interpreter covers what both levels emit."""
  assert build.main(["--opt", "O3", "--out", str(tmp_path)]) == 0
  for name in NAMES:
    spec = KERNELS[name]
    outputs, data, _ = run_corpus_kernel(spec, seed=3, ptx=(tmp_path / f"{name}.ptx").read_text())
    spec.check(outputs, data)


@pytest.fixture(scope="module")
def ptxas():
  try: return ptxas_path(from_env().cache_dir)
  except ToolUnavailable as e: pytest.skip(f"no ptxas: {e}")


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_ptxas_accepts_every_corpus_file(ptxas, arch, tmp_path):
  for name in NAMES:
    with open(os.path.join(PTX_DIR, f"{name}.ptx")) as f: ptx = f.read()
    out = assemble(ptxas, ptx.replace(".target sm_80", f".target {arch}"), arch, str(tmp_path))
    assert "error" not in out.lower(), f"{name} for {arch}:\n{out}"


@pytest.mark.parametrize("name", ["divergent", "local_array", "atomics_shared", "intdiv"])
def test_compacted_and_masked_execution_agree(name, monkeypatch):
  """A block run by few threads runs on those threads only (executor._run_compacted); the same kernel with every
  block run masked over the whole batch gives the same results, and the compacted path is really taken."""
  from hcq.mockgpu.nv.ptx import executor
  spec = KERNELS[name]
  calls = []
  real = executor._run_compacted
  monkeypatch.setattr(executor, "_run_compacted", lambda *a: calls.append(1) or real(*a))
  compacted, data, _ = run_corpus_kernel(spec, seed=3)
  monkeypatch.setattr(executor, "COMPACT_BELOW", 10**9)
  n_compacted = len(calls)
  masked, _, _ = run_corpus_kernel(spec, seed=3)
  assert len(calls) == n_compacted
  if name != "intdiv": assert n_compacted > 0, "no block ran compacted"
  for out in spec.outputs:
    if name == "atomics_shared" and out.name == "cas_max": continue
    np.testing.assert_array_equal(compacted[out.name], masked[out.name], err_msg=f"{name}.{out.name}")
  spec.check(compacted, data)
