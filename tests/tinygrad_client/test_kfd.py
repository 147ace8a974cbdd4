"""tinygrad's AMDDevice on MOCKKFD+AMD: opens /dev/kfd, copies, and runs the committed vadd code object through its
AMDProgram, checked against numpy (run_client.py's run_amd)."""
from client_harness import requires_tinygrad, run_client, steps


@requires_tinygrad
def test_tinygrad_kfd_opens_copies_and_runs_vadd():
  proc = run_client("kfd", "MOCKKFD+AMD")
  assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
  assert steps(proc) == ["open", "copies", "program", "kernel"], proc.stdout
  assert "iface=MOCKKFDIface" in proc.stdout


@requires_tinygrad
def test_tinygrad_kfd_on_the_threaded_mock():
  proc = run_client("kfd", "MOCKKFD+AMD", HCQ_MOCK_THREADED=1)
  assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
  assert steps(proc) == ["open", "copies", "program", "kernel"], proc.stdout
