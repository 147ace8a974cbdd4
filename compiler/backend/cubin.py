"""PTX -> cubin with NVIDIA's own tools, when they are installed: the nvJitLink library (pip nvidia-nvjitlink-cu12)
or ptxas (pip nvidia-cuda-nvcc-cu12, or on PATH). hcq cannot assemble SASS itself; a GPU that runs cubins needs one
of these to load PTX.

nvJitLink's C API (nvJitLink.h, CUDA 12): nvJitLinkCreate(&handle, nopts, opts), nvJitLinkAddData(handle,
NVJITLINK_INPUT_PTX = 2, data, size, name), nvJitLinkComplete, nvJitLinkGetLinkedCubinSize/GetLinkedCubin,
nvJitLinkGetErrorLogSize/GetErrorLog, nvJitLinkDestroy; every call returns 0 on success."""
from __future__ import annotations

import ctypes
import glob
import importlib.util
import os
import shutil
import subprocess
import tempfile

from ..ir import CompileError

NVJITLINK_INPUT_PTX = 2


def _package_dir(name: str) -> str | None:
  try: spec = importlib.util.find_spec(name)
  except (ImportError, ValueError): return None
  if spec is None or not spec.submodule_search_locations: return None
  return list(spec.submodule_search_locations)[0]


class PTXCompiler:
  """Finds nvJitLink or ptxas (config.exec_path is the PATH searched for ptxas)."""

  def __init__(self, config=None):
    self.path = getattr(config, "exec_path", os.defpath)

  def nvjitlink(self) -> str | None:
    d = _package_dir("nvidia.nvjitlink")
    found = sorted(glob.glob(os.path.join(d, "lib", "libnvJitLink.so*"))) if d else []
    return found[0] if found else None

  def ptxas(self) -> str | None:
    d = _package_dir("nvidia.cuda_nvcc")
    if d and os.access(os.path.join(d, "bin", "ptxas"), os.X_OK): return os.path.join(d, "bin", "ptxas")
    return shutil.which("ptxas", path=self.path)

  def available(self) -> bool: return self.nvjitlink() is not None or self.ptxas() is not None

  def compile(self, ptx: bytes, arch: str) -> bytes:
    lib = self.nvjitlink()
    if lib is not None: return self._nvjitlink(lib, ptx, arch)
    exe = self.ptxas()
    if exe is not None: return self._ptxas(exe, ptx, arch)
    raise CompileError(f"PTX for {arch} needs nvJitLink (pip install nvidia-nvjitlink-cu12) or ptxas (pip install "
                       f"nvidia-cuda-nvcc-cu12); neither was found (or load a cubin)")

  @staticmethod
  def _nvjitlink(path: str, ptx: bytes, arch: str) -> bytes:
    lib = ctypes.CDLL(path)
    h = ctypes.c_void_p()
    opts = (ctypes.c_char_p * 1)(f"-arch={arch}".encode())
    def check(rc, call):
      if rc == 0: return
      size = ctypes.c_size_t()
      log = b""
      if h.value and lib.nvJitLinkGetErrorLogSize(h, ctypes.byref(size)) == 0 and size.value:
        buf = ctypes.create_string_buffer(size.value)
        if lib.nvJitLinkGetErrorLog(h, buf) == 0: log = buf.value
      raise CompileError(f"nvJitLink {call} for {arch} failed ({rc}): {log.decode(errors='replace').strip()[:2000]}")
    check(lib.nvJitLinkCreate(ctypes.byref(h), 1, opts), "create")
    try:
      data = ctypes.create_string_buffer(ptx + b"\0")
      check(lib.nvJitLinkAddData(h, NVJITLINK_INPUT_PTX, data, ctypes.c_size_t(len(ptx) + 1), b"kernel.ptx"), "AddData")
      check(lib.nvJitLinkComplete(h), "Complete")
      size = ctypes.c_size_t()
      check(lib.nvJitLinkGetLinkedCubinSize(h, ctypes.byref(size)), "GetLinkedCubinSize")
      out = ctypes.create_string_buffer(size.value)
      check(lib.nvJitLinkGetLinkedCubin(h, out), "GetLinkedCubin")
      return out.raw
    finally: lib.nvJitLinkDestroy(ctypes.byref(h))

  @staticmethod
  def _ptxas(exe: str, ptx: bytes, arch: str) -> bytes:
    with tempfile.TemporaryDirectory(prefix="hcq-ptxas-") as d:
      src, out = os.path.join(d, "k.ptx"), os.path.join(d, "k.cubin")
      with open(src, "wb") as f: f.write(ptx)
      try: proc = subprocess.run([exe, f"-arch={arch}", "-o", out, src], capture_output=True, timeout=300)
      except (OSError, subprocess.TimeoutExpired) as e: raise CompileError(f"could not run {exe}: {e}") from e
      if proc.returncode != 0:
        raise CompileError(f"ptxas -arch={arch} failed (exit {proc.returncode}): "
                           f"{proc.stderr.decode(errors='replace').strip()[:2000]}")
      with open(out, "rb") as f: return f.read()
