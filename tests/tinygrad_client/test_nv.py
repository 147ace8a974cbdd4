"""tinygrad's NV driver on MOCK+NV, the Ada mock (tinygrad 0.14 has no Hopper): opens nvidia.ko (580 control sizes,
PERF_BOOST, a GT200_DEBUGGER session, memory mapped at fixed addresses), copies through its copy engine, and runs a
PTX kernel (its mock-interface program image is the PTX text) whose completion it learns from the QMD's release
semaphore; the result is checked against numpy (run_client.py's run_nv)."""
from client_harness import requires_tinygrad, run_client, steps


@requires_tinygrad
def test_tinygrad_nv_opens_copies_and_runs_a_ptx_kernel_on_the_ada_mock():
  proc = run_client("nv", "MOCK+NV", HCQ_NV_MOCK_GPU="AD102")
  assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
  assert steps(proc) == ["open", "copies", "program", "kernel"], proc.stdout
  assert "NVDevice iface=MOCKIface" in proc.stdout


@requires_tinygrad
def test_tinygrad_nv_on_the_threaded_mock():
  proc = run_client("nv", "MOCK+NV", HCQ_NV_MOCK_GPU="AD102", HCQ_MOCK_THREADED=1)
  assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
  assert steps(proc) == ["open", "copies", "program", "kernel"], proc.stdout
