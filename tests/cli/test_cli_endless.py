"""`hcq run` on a kernel that never ends: HCQ_TIMEOUT bounds it (exit 1, an error naming the kernel the device is stuck
at), and Ctrl-C ends it at once (exit 130); both on the default synchronous mock and the threaded one, no traceback."""
import os
import signal
import subprocess
import sys
import time

import pytest

from hcq.compiler.isa.amd.asm import assemble
from hcq.compiler.isa.amd.cowriter import KernelSpec, write_code_object

MODES = pytest.mark.parametrize("threaded", ["0", "1"], ids=["sync", "threaded"])


@pytest.fixture
def spin(tmp_path):
  path = tmp_path / "spin.hsaco"
  path.write_bytes(write_code_object([KernelSpec("spin", assemble("loop:\n  s_branch loop\n  s_endpgm"))]))
  return str(path)


def _hcq(args, env):
  code = "import sys; from hcq.cli import main; sys.exit(main(sys.argv[1:]))"
  return subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, env={**os.environ, **env})


@MODES
def test_the_timeout_bounds_a_kernel_that_never_ends(spin, threaded):
  p = _hcq(["run", spin, "--kernel", "spin", "--device", "MOCK+AMD"], {"HCQ_TIMEOUT": "1", "HCQ_MOCK_THREADED": threaded})
  out, err = p.communicate(timeout=60)        # an endless wait ends in TimeoutExpired here
  assert p.returncode == 1, (p.returncode, err)
  assert "timed out" in err and "after 1 s" in err and "kernel spin" in err and "Traceback" not in err, err


@MODES
def test_ctrl_c_ends_a_kernel_that_never_ends_at_once(spin, threaded):
  p = _hcq(["run", spin, "--kernel", "spin", "--device", "MOCK+AMD"], {"HCQ_TIMEOUT": "60", "HCQ_MOCK_THREADED": threaded})
  try:
    time.sleep(2.0)                 # started, the kernel is running (the timeout is a minute away)
    assert p.poll() is None, p.communicate()
    p.send_signal(signal.SIGINT)
    # HCQ_TIMEOUT is 60 s: an interrupt that waited for it would end in TimeoutExpired here (no duration asserted)
    out, err = p.communicate(timeout=30)
  finally:
    if p.poll() is None:
      p.kill()
      p.communicate()
  assert p.returncode == 130, (p.returncode, err)
  assert "interrupted" in err and "Traceback" not in err, err
