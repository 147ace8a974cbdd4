"""issue 29 items 10 and 12: `hcq demo` on every kind of device: the CPU runs the demo's vector add and matmul built
by the C backend (it was handed AMD's code object: "cannot open shared object file"); an RDMA NIC runs no kernels, so
its demo is an RDMA WRITE of the vector through PHY loopback, checked; `hcq decode --device` of a device without
command rings is a usage error naming what the device is (was an AttributeError traceback)."""
import pathlib

import pytest

import hcq
from hcq.cli import main

DEMO = pathlib.Path(hcq.__file__).parent / "drivers" / "amd" / "kernels" / "demo.hsaco"


@pytest.mark.parametrize("sizes", [[], ["-n", "1000", "-m", "10"]], ids=["default sizes", "sizes off the work-group grid"])
def test_demo_on_the_cpu_runs_and_checks_both_kernels(capsys, sizes):
  assert main(["demo", "--device", "CPU", *sizes]) == 0
  out = capsys.readouterr().out
  assert "device: CPU" in out
  assert [line.split(":")[1].split()[0] for line in out.splitlines() if line.startswith(("vector add", "matmul"))] == \
         ["ok", "ok"], out


def test_demo_on_a_nic_is_an_rdma_write_checked(capsys):
  assert main(["demo", "--device", "MOCK+BNXT", "-n", "5000"]) == 0
  out = capsys.readouterr().out
  line = next(line for line in out.splitlines() if line.startswith("rdma write"))
  assert "5000 floats: ok" in line and "PHY loopback" in line, out


@pytest.mark.parametrize("spec,words", [("MOCK+BNXT", "RDMA NIC"), ("CPU", "host CPU"), ("MOCK+QCOM", "--qcom FILE")])
def test_decode_of_a_device_without_rings_is_a_usage_error(capsys, spec, words):
  assert main(["decode", "--device", spec]) == 2
  err = capsys.readouterr().err
  assert len(err.strip().splitlines()) == 1 and words in err and spec in err and "Traceback" not in err, err


def test_the_cpu_names_a_gpu_code_object_it_is_given():
  with hcq.open("CPU") as dev:
    with pytest.raises(hcq.DeviceError, match=r"CPU: cannot load an ELF file for AMDGPU .* not for this"):
      dev.load(DEMO.read_bytes(), "vadd")
    with pytest.raises(hcq.DeviceError, match=r"not an ELF file"): dev.load(b"plain bytes", "vadd")
