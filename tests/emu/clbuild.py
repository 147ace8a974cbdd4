"""Build OpenCL C into a gfx1100 (or gfx1200, gfx942) code object (v5) with clang-19 + ld.lld-19 and Debian's
rocm-device-libs.

Commands: clang-19 for amdgcn-amd-amdhsa, as tests/fixtures/opencl/build.py runs it (the device-lib directory needs a synthesised
oclc_isa_version_<v>.bc per target: rocm-device-libs 5.2 stops at 1036; its only content is @__oclc_ISA_version =
major*1000 + minor*100 + stepping, as tests/fixtures/opencl/build.py makes them).
Results are cached by source hash in a temporary directory.
"""
from __future__ import annotations

import glob
import hashlib
import os
import shutil
import subprocess
import tempfile

DEVICE_LIBS = "/usr/lib/x86_64-linux-gnu/amdgcn/bitcode"
CACHE = os.path.join(tempfile.gettempdir(), "hcq-emu-clbuild")
FLAGS = ["-x", "cl", "-Xclang", "-finclude-default-header", "-cl-std=CL3.0", "-target", "amdgcn-amd-amdhsa",
         "-mcode-object-version=5", "-O2"]
ISA_VERSIONS = {"gfx1100": (11000, "1100"), "gfx1200": (12000, "1200"), "gfx942": (9402, "942")}


def available() -> bool:
  return all(shutil.which(t) for t in ("clang-19", "ld.lld-19", "llvm-dis-19", "llvm-as-19")) and \
      os.path.isdir(DEVICE_LIBS)


def _run(cmd, stdin=None) -> bytes:
  p = subprocess.run(cmd, input=stdin, capture_output=True)
  if p.returncode != 0: raise RuntimeError(f"{' '.join(cmd)} failed: {p.stderr.decode(errors='replace')}")
  return p.stdout


def device_lib_dir(mcpu: str = "gfx1100") -> str:
  value, suffix = ISA_VERSIONS[mcpu]
  d = os.path.join(CACHE, "devlib")
  target = os.path.join(d, f"oclc_isa_version_{suffix}.bc")
  if os.path.exists(target): return d
  os.makedirs(d, exist_ok=True)
  for bc in glob.glob(os.path.join(DEVICE_LIBS, "*.bc")):
    link = os.path.join(d, os.path.basename(bc))
    if not os.path.exists(link): os.symlink(bc, link)
  text = _run(["llvm-dis-19", os.path.join(DEVICE_LIBS, "oclc_isa_version_1030.bc"), "-o", "-"]).decode()
  text = text.replace("i32 10300,", f"i32 {value},")
  tmp = target + f".{os.getpid()}"
  _run(["llvm-as-19", "-o", tmp], stdin=text.encode())
  os.replace(tmp, target)
  return d


def build(source: str, extra_flags: tuple[str, ...] = (), mcpu: str = "gfx1100") -> bytes:
  """OpenCL C source -> hsaco bytes for mcpu."""
  key = hashlib.sha256((source + repr(extra_flags) + ("" if mcpu == "gfx1100" else mcpu)).encode()).hexdigest()[:20]
  out = os.path.join(CACHE, f"{key}.hsaco")
  if os.path.exists(out):
    with open(out, "rb") as f: return f.read()
  dl = device_lib_dir(mcpu)
  with tempfile.TemporaryDirectory() as tmp:
    src = os.path.join(tmp, "k.cl")
    with open(src, "w") as f: f.write(source)
    _run(["clang-19", *FLAGS, f"-mcpu={mcpu}", *extra_flags, f"--rocm-device-lib-path={dl}", "-c", src, "-o", os.path.join(tmp, "k.o")])
    _run(["ld.lld-19", "-shared", os.path.join(tmp, "k.o"), "-o", os.path.join(tmp, "k.hsaco")])
    os.makedirs(CACHE, exist_ok=True)
    shutil.copy(os.path.join(tmp, "k.hsaco"), out + f".{os.getpid()}")
    os.replace(out + f".{os.getpid()}", out)
  with open(out, "rb") as f: return f.read()
