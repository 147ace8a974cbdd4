"""A guard against a hang, not a measure of speed: a call that must end (a bounded wait, a refused input) runs in a
thread, and a test fails if it has not ended after a limit far above any machine's load (a regression that waits
for ever then fails the test instead of stalling the suite). No test asserts how fast something is (bench/ does)."""
from __future__ import annotations

import threading

HANG_S = 120.0


def ends(fn, *args, limit_s: float = HANG_S, **kwargs):
  """fn(*args, **kwargs)'s result, or its exception re-raised here; AssertionError if it is still running after
  limit_s (the thread is a daemon: it does not keep the test process alive)."""
  out: dict = {}

  def run():
    try: out["value"] = fn(*args, **kwargs)
    except BaseException as e: out["error"] = e      # noqa: BLE001 - handed to the caller as is

  t = threading.Thread(target=run, name=f"hang guard: {getattr(fn, '__name__', fn)}", daemon=True)
  t.start()
  t.join(limit_s)
  assert not t.is_alive(), f"{getattr(fn, '__name__', fn)} did not end within {limit_s:g} s: it hangs"
  if "error" in out: raise out["error"]
  return out.get("value")
