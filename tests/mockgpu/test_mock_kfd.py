"""The mock KFD: ioctl dispatch from the generated bindings, memory rules, topology, several GPUs, AMDGPU_INFO."""
import ctypes
import errno

import pytest

from hcq.autogen import amdgpu_drm, kfd
from hcq.errors import OSCallError
from hcq.mockgpu import mock_amd_os
from mock_kfd_harness import Harness, pm4


@pytest.fixture
def h():
  har = Harness(gpus=2)
  yield har
  har.os.close()


def test_version_and_topology(h):
  assert (h.version.major_version, h.version.minor_version) == (kfd.KFD_IOCTL_MAJOR_VERSION, kfd.KFD_IOCTL_MINOR_VERSION)
  nodes = h.os.sysfs_list("devices/virtual/kfd/kfd/topology/nodes")
  assert nodes == ["0", "1", "2"]
  assert h.os.sysfs_read("class/kfd/kfd/topology/nodes/0/gpu_id") == "0\n"        # node 0 is the CPU
  ids = [int(h.os.sysfs_read(f"devices/virtual/kfd/kfd/topology/nodes/{n}/gpu_id")) for n in ("1", "2")]
  assert len(set(ids)) == 2 and all(ids)
  p = h.props
  assert p["gfx_target_version"] == 110000 and p["drm_render_minor"] == 128 and p["wave_front_size"] == 32
  assert p["simd_count"] == p["array_count"] * p["cu_per_simd_array"] * p["simd_per_cu"]
  assert p["lds_size_in_kb"] == 64 and p["max_waves_per_simd"] == 16
  # kfd_queue_ctx_save_restore_size for 96 CUs: ctl stack 40 + 3072 waves x 12 + 8 = 0x9030 -> 0xa000 (page aligned);
  # cwsr = ctl stack + 96 x (0x60000 VGPR + 0x4000 SGPR + 0x10000 LDS + 0x1000 HWREG)
  assert p["ctl_stack_size"] == 0xA000 and p["cwsr_size"] == 0xA000 + 96 * 0x75000
  ip = "class/drm/renderD128/device/ip_discovery/die/0/11/0"
  assert [h.os.sysfs_read(f"{ip}/{f}").strip() for f in ("major", "minor", "revision")] == ["11", "0", "0"]
  assert h.os.sysfs_read("class/drm/renderD128/device/vendor") == "0x1002\n"
  dev = "bus/pci/devices/0000:03:00.0"
  used = int(h.os.sysfs_read(f"{dev}/mem_info_vram_used"))
  h.alloc(1 << 20, "vram")
  assert int(h.os.sysfs_read(f"{dev}/mem_info_vram_used")) == used + (1 << 20)
  assert int(h.os.sysfs_read(f"{dev}/mem_info_vram_total")) == 24 << 30
  assert 0 <= int(h.os.sysfs_read(f"{dev}/gpu_busy_percent")) <= 100
  assert h.os.sysfs_read(f"{dev}/hwmon/hwmon0/name") == "amdgpu\n"


def test_unknown_and_unsupported_ioctls_name_themselves(h):
  with pytest.raises(OSCallError, match="request 0xc0ffee is not a KFD or DRM ioctl") as e:
    h.kfd.ioctl(0xC0FFEE, bytearray(16))
  assert e.value.errno == errno.ENOTTY
  with pytest.raises(OSCallError, match="AMDKFD_IOC_SVM is not supported by the mock") as e:
    kfd.AMDKFD_IOC_SVM(h.kfd)
  assert e.value.errno == errno.EINVAL


def test_memory_rules(h):
  a = h.alloc(0x4000, "gtt")
  flags = (kfd.KFD_IOC_ALLOC_MEM_FLAGS_GTT | kfd.KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE) & 0xFFFFFFFF
  with pytest.raises(OSCallError, match="overlaps the allocation") as e:
    kfd.AMDKFD_IOC_ALLOC_MEMORY_OF_GPU(h.kfd, va_addr=a.va + 0x1000, size=0x1000, gpu_id=h.gpu_id, flags=flags)
  assert e.value.errno == errno.EINVAL
  stray = ctypes.create_string_buffer(0x3000)        # host memory the OS interface never handed out
  va = (ctypes.addressof(stray) + 0xFFF) & ~0xFFF
  with pytest.raises(OSCallError, match="not inside memory reserved"):
    kfd.AMDKFD_IOC_ALLOC_MEMORY_OF_GPU(h.kfd, va_addr=va, size=0x1000, gpu_id=h.gpu_id, flags=flags)
  uflags = (kfd.KFD_IOC_ALLOC_MEM_FLAGS_USERPTR | kfd.KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE) & 0xFFFFFFFF
  with pytest.raises(OSCallError, match="USERPTR .* is not host memory") as e:
    kfd.AMDKFD_IOC_ALLOC_MEMORY_OF_GPU(h.kfd, va_addr=va, size=0x1000, gpu_id=h.gpu_id, flags=uflags, mmap_offset=va)
  assert e.value.errno == errno.EFAULT
  with pytest.raises(OSCallError, match="still mapped") as e: kfd.AMDKFD_IOC_FREE_MEMORY_OF_GPU(h.kfd, handle=a.handle)
  assert e.value.errno == errno.EBUSY
  with pytest.raises(OSCallError, match="unknown memory handle"): kfd.AMDKFD_IOC_FREE_MEMORY_OF_GPU(h.kfd, handle=0x1234)
  q = h.queue("compute")  # made before the free: its ring must not reuse the freed range
  u = h.alloc(0x2000, "userptr")
  ctypes.memmove(u.va, b"userptr!", 8)
  h.free(u)
  h.free(a)
  # unmapped from the GPU: a packet touching it now faults
  from hcq.errors import GPUFault
  with pytest.raises(GPUFault) as e: q.submit(pm4(0x37, 5 << 8, a.va, a.va >> 32, 1))
  assert e.value.address == a.va


def test_sub_page_allocation_is_one_page_as_linux_aligns_it(h):
  """amdgpu_amdkfd_gpuvm_alloc_memory_of_gpu makes the BO PAGE_ALIGN(size) bytes (tinygrad allocates 256-byte queue
  pointer blocks); size 0 and an unaligned VA stay refused."""
  flags = (kfd.KFD_IOC_ALLOC_MEM_FLAGS_GTT | kfd.KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE) & 0xFFFFFFFF
  va = h.os.alloc_anon(0x1000, reserve_only=True)
  a = kfd.AMDKFD_IOC_ALLOC_MEMORY_OF_GPU(h.kfd, va_addr=va, size=0x100, gpu_id=h.gpu_id, flags=flags)
  assert h.drm.mmap(0x100, a.mmap_offset, addr=va) == va
  m = kfd.AMDKFD_IOC_MAP_MEMORY_TO_GPU(h.kfd, handle=a.handle, device_ids_array_ptr=ctypes.addressof(h.ids), n_devices=1)
  assert m.n_success == 1
  ctypes.memmove(va + 0xFF8, b"lastword", 8)          # the whole page is the BO's, not only the 256 bytes asked for
  with pytest.raises(OSCallError, match="overlaps the allocation"):      # the page is taken
    kfd.AMDKFD_IOC_ALLOC_MEMORY_OF_GPU(h.kfd, va_addr=va, size=0x100, gpu_id=h.gpu_id, flags=flags)
  with pytest.raises(OSCallError, match="size 0") as e:
    kfd.AMDKFD_IOC_ALLOC_MEMORY_OF_GPU(h.kfd, va_addr=va + 0x2000, size=0, gpu_id=h.gpu_id, flags=flags)
  assert e.value.errno == errno.EINVAL
  with pytest.raises(OSCallError, match="not page aligned"):
    kfd.AMDKFD_IOC_ALLOC_MEMORY_OF_GPU(h.kfd, va_addr=va + 0x100, size=0x100, gpu_id=h.gpu_id, flags=flags)


def test_vram_is_gpu_memory_at_the_reserved_address(h):
  m = h.alloc(0x10000, "vram")
  q = h.queue("sdma")
  q.submit([0xB | (2 << 30), m.va & 0xFFFFFFFF, m.va >> 32, 0x01020304, 0xFFFF])
  assert bytes(h.os.memview(m.va, 8)) == bytes([4, 3, 2, 1] * 2)


def test_several_gpus_and_peer_mapping():
  os_ = mock_amd_os(gpus=2)
  h0 = Harness(os=os_, gpu_index=0)
  h1 = Harness(os=os_, gpu_index=1, parent=h0)
  assert h0.gpu_id != h1.gpu_id and h1.props["drm_render_minor"] == 129
  with pytest.raises(OSCallError, match="event page is already set"):     # one event page per KFD process
    kfd.AMDKFD_IOC_CREATE_EVENT(h1.kfd, event_page_offset=h1.alloc(0x8000, "gtt").handle)
  buf = h0.alloc(0x1000, "gtt")
  ids = (ctypes.c_uint32 * 1)(h1.gpu_id)
  r = kfd.AMDKFD_IOC_MAP_MEMORY_TO_GPU(h0.kfd, handle=buf.handle, device_ids_array_ptr=ctypes.addressof(ids), n_devices=1)
  assert r.n_success == 1
  q = h1.queue("compute")             # GPU 1 writes into GPU 0's allocation
  q.submit(pm4(0x37, 5 << 8, buf.va, buf.va >> 32, 0x600D) + h1.release_signal(h1.signals.va, 1))
  assert buf.u32()[0] == 0x600D and h1.signals.u64()[0] == 1
  os_.close()


def test_amdgpu_info_dev_info(h):
  info = amdgpu_drm.struct_drm_amdgpu_info_device()
  amdgpu_drm.DRM_IOCTL_AMDGPU_INFO(h.drm, return_pointer=ctypes.addressof(info), return_size=ctypes.sizeof(info),
                                   query=amdgpu_drm.AMDGPU_INFO_DEV_INFO)
  assert info.device_id == 0x744C and info.family == amdgpu_drm.AMDGPU_FAMILY_GC_11_0_0
  assert info.cu_active_number == h.props["simd_count"] // h.props["simd_per_cu"]
  assert sum(bin(info.cu_bitmap[se][sa]).count("1") for se in range(4) for sa in range(4)) == info.cu_active_number
  assert info.wave_front_size == 32 and info.gpu_counter_freq == 100_000
  with pytest.raises(OSCallError, match="AMDGPU_INFO is a render-node ioctl"):
    amdgpu_drm.DRM_IOCTL_AMDGPU_INFO(h.kfd, return_pointer=ctypes.addressof(info), return_size=8, query=0x16)
  with pytest.raises(OSCallError) as e:
    amdgpu_drm.DRM_IOCTL_AMDGPU_INFO(h.drm, return_pointer=8, return_size=64, query=amdgpu_drm.AMDGPU_INFO_DEV_INFO)
  assert e.value.errno == errno.EFAULT          # a bad user pointer is EFAULT, not a crash


def test_queue_creation_checks(h):
  ring = h.alloc(0x1000, "gtt")
  with pytest.raises(OSCallError, match="not a power of two"):
    kfd.AMDKFD_IOC_CREATE_QUEUE(h.kfd, ring_base_address=ring.va, ring_size=3000, gpu_id=h.gpu_id,
                                queue_type=kfd.KFD_IOC_QUEUE_TYPE_SDMA, read_pointer_address=ring.va,
                                write_pointer_address=ring.va + 8)
  gart = h.alloc(0x1000, "gtt")
  with pytest.raises(OSCallError, match="ring at 0x7e0000000000 is in no allocation mapped"):
    kfd.AMDKFD_IOC_CREATE_QUEUE(h.kfd, ring_base_address=0x7E0000000000, ring_size=0x1000, gpu_id=h.gpu_id,
                                queue_type=kfd.KFD_IOC_QUEUE_TYPE_SDMA, read_pointer_address=gart.va + 128,
                                write_pointer_address=gart.va + 56)
  big = h.alloc(0x4000, "gtt")     # kfd_queue_buffer_get: the ring must be a whole allocation of ring_size bytes
  with pytest.raises(OSCallError, match="is not 0x2000 bytes"):
    kfd.AMDKFD_IOC_CREATE_QUEUE(h.kfd, ring_base_address=big.va, ring_size=0x2000, gpu_id=h.gpu_id,
                                queue_type=kfd.KFD_IOC_QUEUE_TYPE_SDMA, read_pointer_address=gart.va + 128,
                                write_pointer_address=gart.va + 56)
  eop = h.alloc(0x1000, "vram")
  with pytest.raises(OSCallError, match=f"ctl_stack_size 0x1000 != the node's {h.props['ctl_stack_size']:#x}"):
    kfd.AMDKFD_IOC_CREATE_QUEUE(h.kfd, ring_base_address=ring.va, ring_size=0x1000, gpu_id=h.gpu_id,
                                queue_type=kfd.KFD_IOC_QUEUE_TYPE_COMPUTE, read_pointer_address=gart.va + 128,
                                write_pointer_address=gart.va + 56, eop_buffer_address=eop.va, eop_buffer_size=0x1000,
                                ctl_stack_size=0x1000, ctx_save_restore_size=h.props["cwsr_size"])
  with pytest.raises(OSCallError, match="CWSR area at 0x0 is in no allocation"):
    kfd.AMDKFD_IOC_CREATE_QUEUE(h.kfd, ring_base_address=ring.va, ring_size=0x1000, gpu_id=h.gpu_id,
                                queue_type=kfd.KFD_IOC_QUEUE_TYPE_COMPUTE, read_pointer_address=gart.va + 128,
                                write_pointer_address=gart.va + 56, eop_buffer_address=eop.va, eop_buffer_size=0x1000,
                                ctl_stack_size=h.props["ctl_stack_size"], ctx_save_restore_size=h.props["cwsr_size"])
  q = h.queue("sdma")
  kfd.AMDKFD_IOC_DESTROY_QUEUE(h.kfd, queue_id=q.queue_id)
  with pytest.raises(OSCallError, match=f"no queue {q.queue_id}"): kfd.AMDKFD_IOC_DESTROY_QUEUE(h.kfd, queue_id=q.queue_id)
  with pytest.raises(OSCallError, match="map_mmio"): h.kfd.mmap(0x2000, h.doorbell_base)


def test_wait_events_times_out(h):
  import time
  t0 = time.monotonic()
  result, _ = h.wait(timeout_ms=30)
  assert result == kfd.KFD_IOC_WAIT_RESULT_TIMEOUT and time.monotonic() - t0 >= 0.025
  kfd.AMDKFD_IOC_SET_EVENT(h.kfd, event_id=h.event_id)
  assert h.wait(timeout_ms=0)[0] == kfd.KFD_IOC_WAIT_RESULT_COMPLETE


def test_hcq_open_mock_amd_uses_this_mock():
  import hcq
  import numpy as np
  dev = hcq.open("MOCK+AMD")
  try:
    b = dev.alloc(1 << 16)
    data = np.arange(1 << 14, dtype=np.uint32)
    dev.copyin(b, data)
    assert np.array_equal(np.frombuffer(dev.copyout(b), np.uint32), data)
  finally: dev.close()


def test_process_apertures_and_xnack(h):
  n = kfd.AMDKFD_IOC_GET_PROCESS_APERTURES_NEW(h.kfd, num_of_nodes=0).num_of_nodes
  assert n == 2
  arr = (kfd.struct_kfd_process_device_apertures * n)()
  kfd.AMDKFD_IOC_GET_PROCESS_APERTURES_NEW(h.kfd, kfd_process_device_apertures_ptr=ctypes.addressof(arr), num_of_nodes=n)
  assert arr[0].gpu_id == h.gpu_id and arr[0].lds_base == 1 << 48 and arr[0].scratch_limit == (2 << 48) | 0xFFFFFFFF
  assert arr[0].gpuvm_base <= h.signals.va <= arr[0].gpuvm_limit
  assert kfd.AMDKFD_IOC_SET_XNACK_MODE(h.kfd, xnack_enabled=-1).xnack_enabled == 0
  with pytest.raises(OSCallError) as e: kfd.AMDKFD_IOC_SET_XNACK_MODE(h.kfd, xnack_enabled=1)
  assert e.value.errno == errno.EPERM


def test_munmap_before_unmap_never_crashes_the_host(h):
  """A driver that munmaps first: VRAM stays GPU memory until FREE; USERPTR memory stops being GPU memory at once."""
  from hcq.errors import GPUFault
  q = h.queue("compute")
  v = h.alloc(0x2000, "vram")
  u = h.alloc(0x2000, "userptr")
  h.os.free_anon(v.va, v.size)
  h.os.free_anon(u.va, u.size)
  q.submit(pm4(0x37, 5 << 8, v.va, v.va >> 32, 0x77) + h.release_signal(h.signals.va, 1))
  assert h.signals.u64()[0] == 1                                   # the VRAM write landed (memory still alive)
  with pytest.raises(GPUFault) as e: q.submit(pm4(0x37, 5 << 8, u.va, u.va >> 32, 1))
  assert e.value.address == u.va
  for m in (v, u):
    kfd.AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU(h.kfd, handle=m.handle, device_ids_array_ptr=ctypes.addressof(h.ids), n_devices=1)
    kfd.AMDKFD_IOC_FREE_MEMORY_OF_GPU(h.kfd, handle=m.handle)
  assert h.os.memory.find(v.va) is None                            # the deferred munmap happened at FREE


def test_kfd_allocates_the_event_page_when_the_process_gives_none():
  """libhsakmt's way: CREATE_EVENT without an event page; KFD allocates it, the caller mmaps KFD_MMAP_TYPE_EVENTS."""
  os_ = mock_amd_os()
  f = os_.open("/dev/kfd", 2)
  ev = kfd.AMDKFD_IOC_CREATE_EVENT(f, event_type=kfd.KFD_IOC_EVENT_SIGNAL, auto_reset=1)
  assert ev.event_page_offset >> 62 == 2                       # KFD_MMAP_TYPE_EVENTS (kfd_priv.h)
  page = f.mmap(0x8000, ev.event_page_offset)
  assert ctypes.c_uint64.from_address(page + 8 * ev.event_slot_index).value == 0xFFFFFFFFFFFFFFFF
  kfd.AMDKFD_IOC_SET_EVENT(f, event_id=ev.event_id)
  data = (kfd.struct_kfd_event_data * 1)()
  data[0].event_id = ev.event_id
  r = kfd.AMDKFD_IOC_WAIT_EVENTS(f, events_ptr=ctypes.addressof(data), num_events=1, wait_for_all=1, timeout=10)
  assert r.wait_result == kfd.KFD_IOC_WAIT_RESULT_COMPLETE
  kfd.AMDKFD_IOC_DESTROY_EVENT(f, event_id=ev.event_id)
  with pytest.raises(OSCallError, match=f"no event {ev.event_id}"): kfd.AMDKFD_IOC_DESTROY_EVENT(f, event_id=ev.event_id)
  os_.close()
