"""The adapter that runs tinygrad 0.14 (unmodified) on hcq's mocks: its OS boundary reaches a MockOS.

Imported only inside a tinygrad subprocess started by tests/tinygrad_client (run_client.py puts this folder on
sys.path). See ../README.md for what is routed, what is replaced and why.
"""
from __future__ import annotations

import threading

_lock = threading.Lock()
_os = None


def mock_os():
  """The one MockOS of this process, built on first use from tinygrad's DEV (its interface and device) and hcq's
  Config (HCQ_* variables, read by hcq.config)."""
  global _os
  with _lock:
    if _os is None: _os = _build()
    return _os


def _build():
  from tinygrad.helpers import DEV
  from hcq.config import from_env
  from hcq.mockgpu import mock_amd_os, mock_navi31_os, mock_nv_os
  cfg = from_env()
  devices = {t.device for t in DEV.value if t.device}
  iface = DEV.interface.upper()
  if devices == {"NV"}: return mock_nv_os(cfg)
  if devices == {"AMD"} and iface in ("MOCK", "MOCKKFD"): return mock_amd_os(cfg)
  if devices == {"AMD"} and iface == "MOCKPCI": return mock_navi31_os(cfg)
  raise RuntimeError(f"tinygrad adapter: no hcq mock for DEV={DEV!r} (served: MOCKKFD+AMD, MOCKPCI+AMD, MOCK+NV)")
