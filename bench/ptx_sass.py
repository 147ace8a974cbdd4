#!/usr/bin/env python3
"""PTX code quality: hcq's PTX for the tiled matmul against clang-19's PTX for the same kernel written as CUDA-style
source, both assembled by NVIDIA's ptxas (pinned pip wheel, tests/backend/ptxas_tool.py) for one target.

    .venv/bin/python bench/ptx_sass.py [--n 256] [--tile 16] [--arch sm_90] [--runs 5]

For each it prints what `ptxas -v` reports (registers, shared memory, spills) and the SASS size: the bytes of the
kernel's .text section in the cubin, and that size / 16 as the instruction count (Volta and later encode every SASS
instruction in 128 bits, so the .text size is 16 bytes per instruction). The ratio hcq / clang of the SASS size has a
target of <= 1.5 (issue #17). It also times DSL -> PTX compiles (median of --runs, after a warm-up; target < 50 ms).
bench/codegen.py calls report() too. Skips, saying why, when ptxas cannot be had.
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from hcq.compiler import compile as hcq_compile, examples  # noqa: E402
from hcq.compiler.isa.amd.elf import parse_elf  # noqa: E402
from hcq.config import from_env  # noqa: E402
from tests.backend import ptxas_tool  # noqa: E402   (the pinned ptxas: a build tool, no device)

CLANG = "clang-19"
SASS_BYTES_PER_INSTRUCTION = 16   # Volta+ fixed 128-bit instruction encoding

# the bench/codegen.py OpenCL kernel, as CUDA-style source; the few CUDA names come from clang's NVVM builtins so
# that no CUDA SDK header is needed (-nocudainc)
CUDA = """#define __global__ __attribute__((global))
#define __shared__ __attribute__((shared))
extern "C" __global__ void matmul_tiled(const float *A, const float *B, float *C) {
  __shared__ float As[T][T], Bs[T][T];
  int lx = __nvvm_read_ptx_sreg_tid_x(), ly = __nvvm_read_ptx_sreg_tid_y();
  int row = __nvvm_read_ptx_sreg_ctaid_y() * T + ly, col = __nvvm_read_ptx_sreg_ctaid_x() * T + lx;
  float acc = 0.0f;
  for (int kt = 0; kt < N / T; kt++) {
    As[ly][lx] = A[row * N + kt * T + lx];
    Bs[ly][lx] = B[(kt * T + ly) * N + col];
    __nvvm_barrier_sync(0);
    for (int k = 0; k < T; k++) acc += As[ly][k] * Bs[k][lx];
    __nvvm_barrier_sync(0);
  }
  C[row * N + col] = acc;
}
"""


def clang_ptx(n: int, tile: int, arch: str, workdir: str) -> str:
  src = os.path.join(workdir, "matmul.cu")
  with open(src, "w") as f: f.write(CUDA)
  out = os.path.join(workdir, "clang.ptx")
  argv = [CLANG, "-x", "cuda", "--cuda-device-only", "-nocudainc", "-nocudalib", f"--cuda-gpu-arch={arch}", "-O2",
          "-S", f"-DN={n}", f"-DT={tile}", "-Wno-unknown-cuda-version", src, "-o", out]
  r = subprocess.run(argv, capture_output=True, text=True, timeout=120)
  if r.returncode != 0: raise RuntimeError(f"{CLANG} failed (exit {r.returncode}): {r.stderr[-2000:]}")
  with open(out) as f: return f.read()


def sass_figures(ptxas: str, ptx: str, arch: str, workdir: str, tag: str) -> dict:
  """Assemble ptx with `ptxas -v`; return registers, smem, spills and the SASS .text size of its one kernel."""
  src, cubin = os.path.join(workdir, f"{tag}.ptx"), os.path.join(workdir, f"{tag}.cubin")
  with open(src, "w") as f: f.write(ptx)
  r = subprocess.run([ptxas, f"-arch={arch}", "-v", "-o", cubin, src], capture_output=True, text=True, timeout=120)
  info = r.stdout + r.stderr
  if r.returncode != 0: raise RuntimeError(f"ptxas -arch={arch} refused {tag}'s PTX:\n{info[-2000:]}")
  with open(cubin, "rb") as f: elf = parse_elf(f.read())
  text = [s for s in elf.sections if s.name.startswith(".text.")]
  if len(text) != 1: raise RuntimeError(f"{tag}: expected one kernel .text section, found {[s.name for s in text]}")

  def grab(pattern: str) -> int:
    m = re.search(pattern, info)
    return int(m.group(1)) if m else 0
  return {"registers": grab(r"Used (\d+) registers"), "smem": grab(r"(\d+) bytes smem"),
          "spill_stores": grab(r"(\d+) bytes spill stores"), "sass_bytes": text[0].size,
          "sass_instructions": text[0].size // SASS_BYTES_PER_INSTRUCTION, "kernel": text[0].name[len(".text."):]}


def compile_times(n: int, tile: int, arch: str, runs: int) -> list[float]:
  hcq_compile(examples.elementwise_add().sink, arch)   # warm-up: imports
  times = []
  for _ in range(runs):
    t0 = time.process_time()
    hcq_compile(examples.matmul_tiled_kernel(n, tile), arch)   # DSL construction is part of the measured path
    times.append(time.process_time() - t0)
  return times


def report(n: int = 256, tile: int = 16, arch: str = "sm_90", runs: int = 5) -> dict | None:
  """Print hcq vs clang SASS figures for the tiled matmul; return them (None when ptxas or clang is unavailable)."""
  try: ptxas = ptxas_tool.ptxas_path(from_env().cache_dir)
  except ptxas_tool.ToolUnavailable as e:
    print(f"PTX SASS comparison skipped: {e}")
    return None
  with tempfile.TemporaryDirectory() as tmp:
    ours_ptx = hcq_compile(examples.matmul_tiled_kernel(n, tile), arch)
    try: theirs_ptx = clang_ptx(n, tile, arch, tmp)
    except (OSError, RuntimeError) as e:
      print(f"PTX SASS comparison skipped: {e}")
      return None
    ours, theirs = sass_figures(ptxas, ours_ptx, arch, tmp, "hcq"), sass_figures(ptxas, theirs_ptx, arch, tmp, "clang")
  times = compile_times(n, tile, arch, runs)
  ratio = ours["sass_bytes"] / theirs["sass_bytes"]
  print(f"PTX matmul {n}x{n} f32, {tile}x{tile} tiles, ptxas {ptxas_tool.VERSION} -arch={arch}:")
  for tag, f in (("hcq PTX backend", ours), ("clang-19 -O2 CUDA", theirs)):
    print(f"  {tag}: {f['sass_instructions']} SASS instructions ({f['sass_bytes']} bytes), {f['registers']} registers, "
          f"{f['smem']} bytes smem, {f['spill_stores']} bytes spill stores")
  print(f"  SASS size ratio hcq / clang: {ratio:.2f} (target <= 1.5): {'MET' if ratio <= 1.5 else 'NOT MET'}")
  med = statistics.median(times)
  print(f"  compile DSL -> PTX: CPU time median {med * 1e3:.1f} ms over {runs} (target < 50 ms): "
        f"{'MET' if med < 0.05 else 'NOT MET'}")
  return {"hcq": ours, "clang": theirs, "ratio": ratio, "compile_s": med}


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--n", type=int, default=256)
  ap.add_argument("--tile", type=int, default=16)
  ap.add_argument("--arch", default="sm_90")
  ap.add_argument("--runs", type=int, default=5)
  a = ap.parse_args()
  report(a.n, a.tile, a.arch, a.runs)


if __name__ == "__main__":
  main()
