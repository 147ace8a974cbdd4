"""AM register access, GMC (page tables, TLB invalidation), IH (VM faults) and the boot's early blocks on the mock
Navi 31 (no firmware needed: the boot stops after ih)."""
import pytest

from hcq.drivers.amd.am import gmc as G
from hcq.drivers.amd.am.device import AMDev
from hcq.drivers.amd.am.regs import module_for
from hcq.errors import DeviceError, GPUFault, Timeout

ADDR = "0000:03:00.0"


@pytest.fixture
def dev(navi):
  os, gpu = navi
  d = AMDev(os, ADDR, os.config, until="ih")
  # no firmware here: the RLC autoload that powers GFX is the mock's, then the GC hub is enabled as gfx's hw_init
  # does after it (gmc_v11_0 leaves it off until then)
  assert not gpu.gchub.reg("GCVM_CONTEXT0_CNTL") & 1 and not d.gmc.hubs["GC"].enabled
  gpu.rlc.autoload(gpu)
  d.gmc.enable_gc_hub()
  yield d, gpu
  d.close()


def test_boot_until_ih_traces_each_block(dev):
  d, _ = dev
  blocks = [b for b, _s, _t in d.steps]
  assert blocks[:2] == ["pci", "discovery"] and d.stage == "ih"
  assert [b for b, s, _ in d.steps if s == "hw_init"] == ["nbio", "gmc", "ih"]
  times = [t for _b, _s, t in d.steps]
  assert times == sorted(times)
  with pytest.raises(DeviceError, match="no block 'sdma'"): AMDev(d.os, ADDR, d.config, until="sdma")


def test_registers_direct_and_through_the_index_window(dev):
  d, gpu = dev
  assert d.nbio_regs.read("RCC_DEV0_EPF0_RCC_CONFIG_MEMSIZE") == gpu.vram_size >> 20
  assert d.nbio_regs.field("RCC_DEV0_EPF0_RCC_DOORBELL_APER_EN", "BIF_DOORBELL_APER_EN") == 1
  far = d.access.limit + 0x1234            # beyond the 1 MiB register BAR: MM_INDEX / MM_DATA
  d.access.write(far, 0xCAFEF00D)
  assert gpu.regs.values[far] == 0xCAFEF00D and d.access.read(far) == 0xCAFEF00D
  gpu.vram[0x5000:0x5004] = (0x12345678).to_bytes(4, "little")
  assert d.access.read_vram(0x5000) == 0x12345678


def test_register_modules_by_version():
  assert module_for("GC", (11, 0, 3)).__name__.endswith("gc_11_0_0")
  assert module_for("MP0", (13, 0, 10)).__name__.endswith("mp_13_0_0")
  with pytest.raises(DeviceError, match=r"no register module for GC 10\.3\.0 \(hcq has gc 11\.0\.0, 12\.0\.0\)"):
    module_for("GC", (10, 3, 0))


def test_ih_and_vm_hubs_are_programmed(dev):
  d, gpu = dev
  assert gpu.mmhub.reg("MMVM_CONTEXT0_CNTL") & 1 and gpu.gchub.reg("GCVM_CONTEXT0_CNTL") & 1
  assert gpu.mmhub.invalidations and gpu.gchub.invalidations      # hw_init flushed both hubs for vmid 0
  assert gpu.regs.read(gpu.ih.a["IH_RB_CNTL"]) & 1


def test_page_tables_map_vram_and_system_memory(dev):
  d, gpu = dev
  va = G.VM_BASE + 0x12345000
  buf = d.vram.alloc(0x2000, "test")
  flushes = len(gpu.gchub.invalidations)
  d.gmc.map(va, [buf.offset, buf.offset + 0x1000], system=False)
  assert len(gpu.gchub.invalidations) == flushes + 1 and gpu.nbio.hdp_flushes
  assert gpu.gchub.translate(va + 0x10) == ("vram", buf.offset + 0x10)
  assert gpu.mmhub.translate(va + 0x1008) == ("vram", buf.offset + 0x1008)
  mem = d.pci.alloc_sysmem(0x1000)
  d.gmc.map(va + 0x40000000, mem.paddrs, system=True)      # another PDB1 entry
  assert gpu.gchub.translate(va + 0x40000000 + 4) == ("system", mem.paddrs[0] + 4)
  with pytest.raises(DeviceError, match="outside the VM range"): d.gmc.map(0x1000, [0], system=False)


def test_unmapped_access_faults_through_the_ih_ring(dev):
  d, gpu = dev
  va = G.VM_BASE + 0x7_0000_0000
  with pytest.raises(GPUFault) as model:
    gpu.gchub.translate(va + 0x123)
  assert model.value.address == va + 0x123
  with pytest.raises(GPUFault, match=r"UTCL2 \(GC hub\) page fault, vmid 0") as fault: d.ih.poll()
  assert fault.value.address == va       # the IV entry carries the page
  assert d.ih.poll() == []


def test_tlb_invalidation_waits_are_bounded_and_named(dev):
  d, gpu = dev
  req = gpu.regs.addr(34, "mmhub_3_0_0", "MMVM_INVALIDATE_ENG17_REQ")
  gpu.regs.write_hooks.pop(req)          # the engine never acknowledges
  gpu.regs.poke(gpu.regs.addr(34, "mmhub_3_0_0", "MMVM_INVALIDATE_ENG17_ACK"), 0)
  with pytest.raises(Timeout, match=r"MMHUB MMVM_INVALIDATE_ENG17_ACK & 0x1 to reach 0x1 \(last seen 0x0\) after 0\.5 s"):
    d.gmc.flush_tlb()


def test_an_interrupt_posted_under_the_gpu_lock_does_not_deadlock_with_a_tlb_flush(dev):
  """The engines' worker posts IH entries holding the GPU's lock; a driver's TLB flush holds the register file's lock
  while the hub makes the engines re-read the page tables (taking the GPU's lock). The post must not wait for the
  register file's lock: that order inversion hung the threaded corpus."""
  import threading
  d, gpu = dev
  held, done = threading.Event(), []

  def worker():
    with gpu.cp.gpu.lock:
      held.set()
      flusher.start()
      import time
      time.sleep(0.2)              # the flush now holds the register file's lock and waits for the GPU's
      gpu.ih.post(0x14, 181, [7, 0, 0, 0])
      done.append("posted")

  flusher = threading.Thread(target=lambda: (d.gmc.flush_tlb(), done.append("flushed")), daemon=True)
  w = threading.Thread(target=worker, daemon=True)
  w.start()
  w.join(5)
  flusher.join(5)
  assert not w.is_alive() and not flusher.is_alive() and sorted(done) == ["flushed", "posted"]
  assert [e["data"][0] for e in d.ih.poll()] == [7]
