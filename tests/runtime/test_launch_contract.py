"""One launch contract (issue 31, item 2): the launch shape, the launch queue program, the code-image cache and the
interface guard of a failed set-up are written once, in drivers/hcq; the vendors give only their per-shape data.
Nothing unreferenced is left in the runtime."""
from __future__ import annotations

import ast
import os
import re
from collections import Counter

import pytest

import hcq
from hcq.drivers.hcq.program import LaunchShape, Program
from hcq.drivers.hcq.runtime import HCQDevice

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VENDORS = ("amd", "nv", "qcom", "cpu")
EMPTY_QCOM = b"@localsize 1, 1, 1\nend\nnop\n"
EMPTY_PTX = b""".version 7.0
.target sm_86
.address_size 64
.visible .entry empty()
{
  ret;
}
"""


def _sources(folder):
  for d, _, files in os.walk(os.path.join(ROOT, "drivers", folder)):
    if "__pycache__" in d: continue
    for f in files:
      if f.endswith(".py"): yield os.path.join(d, f)


def test_no_vendor_builds_its_own_launch_shape_or_launch_queue_program():
  """No vendor module defines a shape class, make_shape, launch_cmdbuf or its own code-image dict; the runtime's
  Program.make_shape and HCQDevice.launch_cmdbuf are the only ones."""
  found = []
  for vendor in VENDORS:
    for path in _sources(vendor):
      tree = ast.parse(open(path).read())
      for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and "Shape" in node.name: found.append(f"{path}: class {node.name}")
        if isinstance(node, ast.FunctionDef) and node.name in ("make_shape", "launch_cmdbuf"):
          found.append(f"{path}: def {node.name}")
        if isinstance(node, ast.Attribute) and node.attr == "_images": found.append(f"{path}: self._images")
  assert not found, found


def test_failed_set_up_closes_the_interface_on_every_vendor(monkeypatch):
  """HCQDevice._set_up: a vendor set-up that raises closes the iface (written once, for AMD, NV and QCOM)."""
  from hcq.config import Config
  from hcq.drivers.amd.device import AMDDevice
  from hcq.drivers.nv.device import NVDevice
  from hcq.drivers.qcom.device import QCOMDevice
  from hcq.mockgpu import MockOS

  class Iface:
    label, arch, props, closed = "FAKE:0", "fake", {}, False
    compute_class = copy_class = 0
    sm_version = 0x860
    def close(self): self.closed = True

  def broken(self): raise RuntimeError("set-up failed")
  for cls in (AMDDevice, NVDevice, QCOMDevice):
    monkeypatch.setattr(cls, "_setup", broken)
    iface = Iface()
    with pytest.raises(RuntimeError, match="set-up failed"): cls(iface, MockOS(Config()), Config())
    assert iface.closed, cls.__name__


@pytest.mark.parametrize("spec, image, name", [("MOCK+AMD", None, "empty"), ("MOCK+NV", EMPTY_PTX, "empty"),
                                               ("MOCK+QCOM", EMPTY_QCOM, "empty")])
def test_every_vendor_launches_through_the_runtimes_shape(spec, image, name):
  """The shape is the runtime's LaunchShape, its command buffer the runtime's launch queue program (a timed shape has
  the two timestamps more), built once per shape; the code image is uploaded once per device."""
  if image is None:
    from hcq.drivers.amd.kernels import demo_code_object
    image = demo_code_object()
  with hcq.open(spec) as dev:
    prog = dev.load(image, name)
    assert isinstance(prog, Program)
    loaded = len(dev._images)
    assert dev.load(image, name) is not prog and len(dev._images) == loaded      # one upload per image
    shape = prog.shape((2,), (1,), False)
    assert type(shape) is LaunchShape and shape.grid == (2, 1, 1) and shape.block == (1, 1, 1)
    assert prog.shape((2, 1, 1), (1, 1, 1), False) is shape                      # built once
    timed = prog.shape((2,), (1,), True)
    assert timed is not shape and len(timed.cmd) > len(shape.cmd)
    again = dev.launch_cmdbuf(prog.name, prog.launch_handle(shape), shape.grid, shape.block, False)
    assert list(again.template) == list(shape.cmd.template)
    assert prog(global_size=(2,), local_size=(1,), wait=True) is not None
    dev.synchronize()


def test_nothing_in_the_runtime_is_unreferenced():
  """Every function and class drivers/hcq defines is named somewhere else in the package (its tests and docs
  included): dead code such as Submission.add_last does not come back."""
  texts = []
  for d, dirs, files in os.walk(ROOT):
    dirs[:] = [x for x in dirs if x not in (".venv", ".git", "__pycache__", "node_modules") and not x.endswith(".egg-info")]
    texts += [open(os.path.join(d, f), errors="replace").read() for f in files if f.endswith((".py", ".md"))
              and os.path.getsize(os.path.join(d, f)) < 1 << 20]
  words = Counter(w for t in texts for w in re.findall(r"\w+", t))
  dead = []
  for path in _sources("hcq"):
    for m in re.finditer(r"^\s*(?:def|class)\s+(\w+)", open(path).read(), re.M):
      name = m.group(1)
      if name.startswith("__") and name.endswith("__"): continue
      if words[name] < 2: dead.append(f"{os.path.relpath(path, ROOT)}: {name}")
  assert not dead, dead
  assert not hasattr(HCQDevice, "add_last")


# ---- the CPU device on the same Program contract (issue 31, item 3)
def _cpu_kernel(dev, n=4):
  from hcq.compiler import KernelInfo, UOp, dtypes
  buf = UOp.param(0, dtypes.float32, n)
  i = UOp.special(n, "gidx0")
  return dev.compile(buf.index(i).store(buf.index(i).load() + 1.0).sink(arg=KernelInfo("inc")))


def test_the_cpu_program_is_a_program_with_the_gpus_wait_default():
  """prog(...) without wait= returns at once on every device (None); the result is there after synchronize."""
  import inspect
  import numpy as np
  from hcq.drivers.amd.kernels import demo_code_object
  with hcq.open("CPU") as cpu, hcq.open("MOCK+AMD") as gpu:
    prog = _cpu_kernel(cpu)
    gprog = gpu.load(demo_code_object(), "empty")
    assert isinstance(prog, Program) and isinstance(gprog, Program)
    waits = {type(p).__name__: inspect.signature(type(p).__call__).parameters["wait"].default for p in (prog, gprog)}
    assert set(waits.values()) == {False}, waits
    a = cpu.alloc(16)
    cpu.copyin(a, np.zeros(4, np.float32))
    assert prog(a, global_size=(4,)) is None
    assert gprog(global_size=(1,)) is None
    cpu.synchronize()
    assert (np.frombuffer(cpu.copyout(a), np.float32) == 1).all()
    assert prog(a, global_size=(4,), wait=True) > 0


@pytest.mark.parametrize("global_size, local_size", [((1,), (2048,)), ((1,), (0,)), ((1, 1, 1, 1), (1,)),
                                                     ((1,), (1, 1025)), ((1,), "x"), ((-1,), (1,)),
                                                     ((2**31,), (4,))])
def test_the_cpu_checks_launch_sizes_as_the_gpus_do(global_size, local_size):
  """The same sizes are refused with the same words (check_launch) on the CPU and on a GPU, before anything runs."""
  from hcq.drivers.amd.kernels import demo_code_object
  with hcq.open("CPU") as cpu, hcq.open("MOCK+AMD") as gpu:
    prog, gprog = _cpu_kernel(cpu), gpu.load(demo_code_object(), "empty")
    a = cpu.alloc(16)
    with pytest.raises(hcq.DeviceError) as on_cpu: prog(a, global_size=global_size, local_size=local_size)
    with pytest.raises(hcq.DeviceError) as on_gpu: gprog(global_size=global_size, local_size=local_size)
    # (the maximum work-group is each kernel's: 1024 threads on the CPU, the code object's on the GPU)
    said = [re.sub(r"maximum of \d+", "maximum of N", str(e.value).split(": ", 1)[1]) for e in (on_cpu, on_gpu)]
    assert said[0] == said[1], said
    assert not cpu._launches            # nothing ran


def test_the_cpu_refuses_more_work_groups_than_the_kernel_was_built_for():
  with hcq.open("CPU") as cpu:
    prog = _cpu_kernel(cpu)
    with pytest.raises(hcq.DeviceError, match=r"global size \(8, 1, 1\) exceeds the \(4, 1, 1\)"):
      prog(cpu.alloc(16), global_size=(8,))
    assert not cpu._launches
