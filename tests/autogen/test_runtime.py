"""The runtime of generated modules: Ioctl objects (through a file object's .ioctl and on a raw fd), struct
helpers, register views. Generated modules import without libclang."""
from __future__ import annotations

import ctypes
import errno
import os
import subprocess
import sys

import pytest

from hcq.autogen import kfd, drm, vfio
from hcq.autogen.runtime import IoctlError, as_dict, init


class FakeFile:
  """An OS-interface-like open file that answers AMDKFD_IOC_GET_VERSION and refuses the rest."""

  def __init__(self): self.calls = []

  def ioctl(self, request, arg):
    self.calls.append((request, type(arg).__name__))
    if request == kfd.AMDKFD_IOC_GET_VERSION.request:
      arg.major_version, arg.minor_version = 1, 17
      return 0
    raise OSError(errno.EINVAL, os.strerror(errno.EINVAL))


def test_ioctl_object_parts():
  io = kfd.AMDKFD_IOC_CREATE_QUEUE
  assert (io.dir, io.type, io.nr) == (3, ord("K"), 0x02)
  assert io.struct is kfd.struct_kfd_ioctl_create_queue_args
  assert io.request == (3 << 30) | (ctypes.sizeof(io.struct) << 16) | (ord("K") << 8) | 0x02
  assert vfio.VFIO_GET_API_VERSION.struct is None and vfio.VFIO_GET_API_VERSION.dir == 0


def test_ioctl_goes_through_the_file_objects_ioctl_and_returns_the_filled_struct():
  f = FakeFile()
  out = kfd.AMDKFD_IOC_GET_VERSION(f)
  assert (out.major_version, out.minor_version) == (1, 17)
  assert f.calls == [(kfd.AMDKFD_IOC_GET_VERSION.request, "struct_kfd_ioctl_get_version_args")]


def test_ioctl_fields_build_the_struct():
  seen = {}

  class F:
    def ioctl(self, request, arg):
      seen.update(as_dict(arg)); return 0
  kfd.AMDKFD_IOC_CREATE_QUEUE(F(), ring_base_address=0x1000, ring_size=4096, gpu_id=7, queue_type=2)
  assert seen["ring_base_address"] == 0x1000 and seen["ring_size"] == 4096 and seen["gpu_id"] == 7
  with pytest.raises(AttributeError, match="no_such_field"): kfd.AMDKFD_IOC_CREATE_QUEUE(F(), no_such_field=1)


def test_ioctl_failure_names_the_ioctl_and_errno():
  with pytest.raises(IoctlError) as e: kfd.AMDKFD_IOC_CREATE_QUEUE(FakeFile(), gpu_id=1)
  assert "AMDKFD_IOC_CREATE_QUEUE" in str(e.value) and e.value.errno == errno.EINVAL and "Errno 22" in str(e.value)


def test_ioctl_failure_from_the_os_interface_becomes_an_ioctl_error():
  from hcq.errors import DeviceError, OSCallError

  class F:
    path = "/dev/kfd"
    def ioctl(self, request, arg): raise OSCallError("ioctl", self.path, errno.ENOMEM, "the mock ran out of VRAM")
  with pytest.raises(IoctlError) as e: kfd.AMDKFD_IOC_ALLOC_MEMORY_OF_GPU(F(), size=1 << 40)
  assert isinstance(e.value, DeviceError)
  assert "ioctl AMDKFD_IOC_ALLOC_MEMORY_OF_GPU on /dev/kfd failed" in str(e.value) and e.value.errno == errno.ENOMEM
  assert str(e.value).endswith("; the mock ran out of VRAM)")   # what the file said is kept


def test_ioctl_on_a_raw_fd_uses_fcntl():
  fd = os.open("/dev/null", os.O_RDONLY)
  try:
    with pytest.raises(IoctlError) as e: drm.DRM_IOCTL_VERSION(fd)
    assert e.value.errno == errno.ENOTTY and "DRM_IOCTL_VERSION" in str(e.value)
  finally:
    os.close(fd)


def test_ioctl_with_a_scalar_argument():
  got = []

  class F:
    def ioctl(self, request, arg): got.append((request, arg.value)); arg.value = 0; return 0
  out = drm.DRM_IOCTL_MODE_RMFB(F(), 42)
  assert got == [(drm.DRM_IOCTL_MODE_RMFB.request, 42)] and out.value == 0
  assert drm.DRM_IOCTL_MODE_RMFB.request == 0xc00464af   # DRM_IOWR(0xAF, unsigned int)


def test_anonymous_members_are_reachable_as_in_c():
  ev = init(kfd.struct_kfd_event_data, event_id=5)
  ev.memory_exception_data.gpu_id = 3
  assert ev.event_id == 5 and ev.memory_exception_data.gpu_id == 3
  assert kfd.struct_kfd_event_data.memory_exception_data.offset == 0


def test_constants_keep_c_values():
  from hcq.autogen import pci
  assert kfd.KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE == -(1 << 31)          # (1 << 31) is INT_MIN in C
  assert pci.PCI_BASE_ADDRESS_MEM_MASK == 0xfffffffffffffff0         # ~0x0fUL
  assert isinstance(kfd.AMDKFD_IOCTL_BASE, int) and kfd.AMDKFD_IOCTL_BASE == ord("K")


def test_register_view():
  from hcq.autogen.amd import gc_11_0_0 as gc
  r = gc.REGS.COMPUTE_PGM_RSRC2
  assert (r.offset, r.base_idx) == (gc.regCOMPUTE_PGM_RSRC2, gc.regCOMPUTE_PGM_RSRC2_BASE_IDX)
  assert r.fields["USER_SGPR"].shift == gc.COMPUTE_PGM_RSRC2__USER_SGPR__SHIFT
  assert r.fields["USER_SGPR"].mask == gc.COMPUTE_PGM_RSRC2__USER_SGPR_MASK
  v = r.encode(USER_SGPR=15, TGID_X_EN=1)
  assert r.decode(v)["USER_SGPR"] == 15 and r.decode(v)["TGID_X_EN"] == 1
  with pytest.raises(ValueError): r.encode(USER_SGPR=64)
  assert r.addr([0x1260, 0xa000]) == 0x1260 + r.offset


def test_generated_modules_import_without_libclang(tmp_path):
  # a `clang` package that fails on import stands in front of the real one
  (tmp_path / "clang").mkdir()
  (tmp_path / "clang" / "__init__.py").write_text("raise ImportError('libclang must not be needed')\n")
  from hcq.autogen import generator
  names = list(generator.load_manifest()["modules"])   # every generated module
  code = "import importlib\n" + "".join(f"importlib.import_module('hcq.autogen.{n}')\n" for n in names) + "print('ok')"
  r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                     env={**os.environ, "PYTHONPATH": str(tmp_path)})
  assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


def test_no_generated_module_is_over_5_mb():
  from hcq.autogen import generator
  for name in generator.load_manifest()["modules"]:
    p = os.path.join(generator.PACKAGE_DIR, generator.module_path(name))
    assert os.path.getsize(p) < 5 * 1024 * 1024, p
