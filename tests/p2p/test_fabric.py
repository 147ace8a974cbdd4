"""The mock PCI fabric routes a peer's DMA by bus address: into another function's memory BAR (a GPU's VRAM
aperture), never into a register BAR, and an address nothing claims is a DMA fault naming it."""
import pytest

from hcq.config import Config
from hcq.errors import GPUFault
from hcq.mockgpu import mock_navi31_os
from hcq.mockgpu.bnxt.nic import MockThor2


def test_nic_dma_into_the_gpu_vram_bar_reaches_vram():
  os = mock_navi31_os(Config(timeout_s=5.0))
  try:
    nic = os.add_device(MockThor2(seed=1))
    navi = next(fn for fn in os.pci_functions.values() if fn is not nic and 0 in fn.bars)
    vram = navi.bars[0]
    nic.dma_write(vram.bus_address + 0x123450, b"peer-to-peer")
    assert vram.view.read_bytes(0x123450, 12) == b"peer-to-peer"
    vram.view.write_bytes(0x200000, b"from VRAM..!")
    assert nic.dma_read(vram.bus_address + 0x200000, 12) == b"from VRAM..!"
    # a register BAR (the GPU's MMIO) is not memory: the NIC's DMA there faults, naming the address
    regs = navi.bars[5]
    with pytest.raises(GPUFault, match=f"{regs.bus_address:#x}"):
      nic.dma_write(regs.bus_address, b"\0" * 4)
  finally:
    os.close()


@pytest.fixture(scope="module")
def fw_dir():
  from hcq.autogen import fwpackage, sources
  from hcq.config import from_env
  try: return fwpackage.firmware_dir(from_env().autogen_cache, log=lambda *a: None)
  except sources.SourceError as e: pytest.skip(f"no AMD firmware package: {e}")


def test_rdma_write_into_am_vram_through_the_bar(fw_dir, tmp_path):
  """An AM (MOCKPCI+AMD) VRAM buffer registered with the NIC from its pages in the VRAM BAR; an RDMA WRITE lands in
  VRAM, which the GPU then reads back."""
  from hcq.drivers.amd.am.session import open_am
  from hcq.drivers.bnxt.device import BNXTDev
  from hcq.drivers.bnxt.qp import BNXTQP
  from hcq.drivers.hcq import p2p
  from hcq.drivers.system.pci import PCIDevice
  cfg = Config(timeout_s=5.0, lock_dir=str(tmp_path), firmware_dir=fw_dir)
  os = mock_navi31_os(cfg)
  gpu = nic = None
  try:
    model = os.add_device(MockThor2(seed=2))
    gpu = open_am(os, 0, cfg)
    nic = BNXTDev(PCIDevice(os, model.addr), os, cfg)
    nic.set_ip("10.0.200.5")
    a, b = BNXTQP(nic), BNXTQP(nic)
    a.connect(b.qpn, nic.gid, nic.mac)
    b.connect(a.qpn, nic.gid, nic.mac)
    nic.set_loopback(True)
    n = 3 * 4096 + 512
    dst = gpu.alloc(n)                       # VRAM, not CPU-visible
    pages = gpu.dma_pages(dst)
    bar = gpu.session.am.pci.vram_bus_address()
    assert len(pages) == 4 and all(bar <= p < bar + gpu.session.am.pci.bar_size("vram") for p in pages)
    _, remote = p2p.register(nic, gpu, dst)
    src = nic.alloc(n)
    data = bytes((i * 37 + 11) & 0xFF for i in range(n))
    src.write(0, data)
    a.rdma_write(remote.va, remote.rkey, src.va, nic.register_mr(src), n)
    assert gpu.copyout(dst) == data
    assert model.errors == []
  finally:
    if nic is not None: nic.close()
    if gpu is not None: gpu.close()
    os.close()


def test_am_gpu_posts_rdma_write_from_vram(fw_dir, tmp_path):
  """MOCKPCI+AMD drives the NIC: its page tables map the NIC's doorbell page (system PTEs to BAR2's bus address), the
  QP's queues live in the GPU's host-visible memory; kernel -> GPU-posted RDMA WRITE (VRAM -> VRAM through the BAR,
  then the flag) -> the queue waits for the flag -> kernel, checked against numpy."""
  import numpy as np
  from hcq.drivers.amd.am.session import open_am
  from hcq.drivers.amd.kernels import demo_code_object
  from hcq.drivers.bnxt.device import BNXTDev
  from hcq.drivers.bnxt.gpuq import GPUPoster
  from hcq.drivers.bnxt.qp import BNXTQP
  from hcq.drivers.hcq import p2p
  from hcq.drivers.system.pci import PCIDevice
  cfg = Config(timeout_s=5.0, lock_dir=str(tmp_path), firmware_dir=fw_dir)
  os = mock_navi31_os(cfg)
  gpu = nic = None
  try:
    model = os.add_device(MockThor2(seed=3))
    gpu = open_am(os, 0, cfg)
    nic = BNXTDev(PCIDevice(os, model.addr), os, cfg)
    nic.set_ip("10.0.200.5")
    a, b = BNXTQP(nic, queue_memory=p2p.QueueMemory(gpu)), BNXTQP(nic)
    a.connect(b.qpn, nic.gid, nic.mac)
    b.connect(a.qpn, nic.gid, nic.mac)
    nic.set_loopback(True)
    poster = GPUPoster(a, gpu)
    n = 2048
    rng = np.random.default_rng(5)
    x, y = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    bx, by, bc, dst, out = (gpu.alloc(4 * n) for _ in range(5))      # VRAM
    slot, flag = gpu.alloc(8, host=True), gpu.alloc(8)
    gpu.copyin(bx, x.tobytes())
    gpu.copyin(by, y.tobytes())
    src_l, _ = p2p.register(nic, gpu, bc)
    _, dst_r = p2p.register(nic, gpu, dst)
    slot_l, _ = p2p.register(nic, gpu, slot)
    _, flag_r = p2p.register(nic, gpu, flag)
    vadd = gpu.load(demo_code_object(), "vadd")
    vadd(bx, by, bc, n, global_size=(n,), local_size=(64,))
    sent = p2p.rdma_write(gpu, poster, src_l, dst_r, 4 * n, flag=(slot_l, flag_r, 3))
    p2p.wait_arrival(gpu, flag.va, 3)
    vadd(dst, dst, out, n, global_size=(n,), local_size=(64,))
    p2p.wait(gpu, sent, poster)
    gpu.synchronize()
    np.testing.assert_array_equal(np.frombuffer(gpu.copyout(out), dtype=np.float32), 2 * (x + y))
    assert model.errors == []
  finally:
    if nic is not None: nic.close()
    if gpu is not None: gpu.close()
    os.close()
