"""Device buffers of an AM device live in VRAM (issue 15): the VRAM allocator, VRAM page tables, the CPU view of a
buffer through the VRAM BAR at its GPU VA, and the mock's MMU making VAs mapped to VRAM reach it for its engines."""
import ctypes
import errno
import os as _os

import numpy as np
import pytest

from hcq.config import Config
from hcq.drivers.amd.am import gmc as G
from hcq.errors import DeviceError, GPUFault, OSCallError

PAGE = 0x1000


def demo():
  path = _os.path.join(_os.path.dirname(__file__), "..", "..", "..", "drivers", "amd", "kernels", "demo.hsaco")
  with open(path, "rb") as f: return f.read()


@pytest.fixture
def dev(fw_dir):
  import hcq
  with hcq.open("MOCKPCI+AMD", config=Config(timeout_s=5, firmware_dir=fw_dir)) as d:
    yield d, d.owned_os.devices[0], d.session


def _power_gfx(os, am):
  """No firmware runs in a boot until gmc: the RLC autoload that powers GFX is the mock's; the GC hub is then
  enabled as gfx's hw_init does (gmc leaves it off: it has no power before)."""
  gpu = os.devices[0]
  gpu.rlc.autoload(gpu)
  am.gmc.enable_gc_hub()


def _vadd(d, a, b):
  vadd = d.load(demo(), "vadd")
  da, db, dc = d.alloc(a.nbytes), d.alloc(b.nbytes), d.alloc(a.nbytes)
  d.copyin(da, a)
  d.copyin(db, b)
  vadd(da, db, dc, len(a), global_size=(1,), local_size=(len(a),), wait=True)
  return dc


def test_a_device_buffer_va_translates_to_vram_pages_in_the_drivers_own_tables(dev):
  d, gpu, session = dev
  buf = d.alloc(3 * PAGE + 5)
  mem = buf.handle
  assert mem.vram is not None and mem.sysmem is None and mem.cpu is None
  am = session.am
  for off in range(0, 4 * PAGE, PAGE):
    pte = am.gmc.lookup(buf.va + off)                   # read back from VRAM through the BAR
    assert pte & G.PTE_VALID and not pte & G.PTE_SYSTEM, hex(pte)
    assert pte & G.ADDR_MASK == am.gmc.pa(mem.vram.offset + off)      # physical, not MC
    assert gpu.gchub.translate(buf.va + off + 7) == ("vram", mem.vram.offset + off + 7)
  assert am.gmc.lookup(buf.va + 4 * PAGE) & G.PTE_VALID == 0        # the guard page after it


def test_fragments_mark_aligned_contiguous_vram(dev):
  d, gpu, session = dev
  am = session.am
  buf = am.vram.alloc_user(4 << 20, "fragment test", align=2 << 20)
  va = G.VM_BASE + (0x3 << 32)            # 2 MiB aligned, below the range AMSession hands out
  am.gmc.map_vram(va, buf.offset, buf.size)
  frag = lambda at: (am.gmc.lookup(at) >> 7) & 0x1F
  try:
    assert frag(va) == frag(va + (4 << 20) - PAGE) == G.MAX_FRAG       # 2 MiB blocks, aligned in VA and VRAM
    other = va + (8 << 20)
    am.gmc.map_vram(other, buf.offset + PAGE, 4 * PAGE)                 # VRAM one page off the VA's alignment
    assert [frag(other + i * PAGE) for i in range(4)] == [0, 0, 0, 0]
    am.gmc.map_vram(other + (2 << 20), buf.offset, 3 * PAGE)            # aligned: a pair, then a single page
    assert [frag(other + (2 << 20) + i * PAGE) for i in range(3)] == [1, 1, 0]
    am.gmc.unmap(other, 4)
    am.gmc.unmap(other + (2 << 20), 3)
  finally:
    am.gmc.unmap(va, buf.size // PAGE)
    am.vram.free(buf)


def test_a_failed_map_leaves_no_pte_behind(navi_fw):
  """A map that fails part-way (no VRAM left for the next page table) takes back the PTEs it wrote: the caller frees
  the memory next, and the GPU must not reach it through them."""
  from hcq.drivers.amd.am.device import AMDev
  os, gpu = navi_fw
  with AMDev(os, "0000:03:00.0", os.config, until="gmc") as am:
    _power_gfx(os, am)
    edge = G.VM_BASE + (0x5 << 32) + (2 << 20)          # the first page table ends here, the next one is not made yet
    buf = am.vram.alloc_user(2 * PAGE, "map failure test")
    am.gmc.map_vram(edge - 2 * PAGE, buf.offset, PAGE)
    rest = [am.vram.alloc_user(size, "all the rest") for _, size in sorted(am.vram._free, key=lambda b: -b[1])]
    with pytest.raises(DeviceError, match="VRAM exhausted.*page table"):
      am.gmc.map_vram(edge - PAGE, buf.offset, 2 * PAGE)
    assert am.gmc.lookup(edge - PAGE) & G.PTE_VALID == 0        # written before the failure, taken back
    assert am.gmc.lookup(edge - 2 * PAGE) & G.PTE_VALID          # what an earlier map call mapped stays
    for b in rest: am.vram.free(b)
    am.gmc.map_vram(edge - PAGE, buf.offset, 2 * PAGE)            # with VRAM for the table it maps
    assert am.gmc.lookup(edge) & G.ADDR_MASK == am.gmc.pa(buf.offset + PAGE)


def test_the_mock_engines_reach_a_va_whose_vram_changed_in_one_flush(navi_fw):
  """The same VA and size mapped to other VRAM between two TLB flushes: the MMU views the new VRAM there and the
  engines still reach the VA."""
  from hcq.drivers.amd.am.device import AMDev
  os, gpu = navi_fw
  with AMDev(os, "0000:03:00.0", os.config, until="gmc") as am:
    _power_gfx(os, am)
    a, b = am.vram.alloc_user(PAGE, "first"), am.vram.alloc_user(PAGE, "second")
    am.vram.write(b.offset, b"second")
    va = G.VM_BASE + (0x5 << 32)
    am.gmc.map_vram(va, a.offset, PAGE)
    am.gmc.map_vram(va, b.offset, PAGE)                                  # no unmap between: one flush sees both
    assert (va, PAGE) in gpu.cp.gpu.ranges.ranges()
    assert os.memory.view_of(va) == (gpu.vram_fd, b.offset, 1)
    assert ctypes.string_at(va, 6) == b"second"
    am.gmc.unmap(va, 1)
    assert (va, PAGE) not in gpu.cp.gpu.ranges.ranges() and os.memory.view_of(va) is None


def _fragments_hold(am, va, pages):
  """Every valid PTE's fragment (the aligned 2^f pages around it) is valid and contiguous in VRAM throughout."""
  seen = set()
  for i in range(pages):
    pte = am.gmc.lookup(va + i * PAGE)
    if not pte & G.PTE_VALID: continue
    f = (pte >> 7) & 0x1F
    start = ((va >> 12) + i) & ~((1 << f) - 1)
    if (start, f) in seen: continue
    seen.add((start, f))
    base = am.gmc.lookup(start << 12)
    for k in range(1 << f):
      q = am.gmc.lookup((start + k) << 12)
      assert q & G.PTE_VALID and q & G.ADDR_MASK == (base & G.ADDR_MASK) + k * PAGE, (hex(va + i * PAGE), f, k)


def test_contiguous_vram_ptes_are_built_as_blocks_and_equal_the_page_by_page_ones():
  """map_vram's range takes the block path (one range of PTEs per fragment); any list of pages, the page-by-page one:
  both give the same PTEs."""
  import random
  rng = random.Random(5)
  for _ in range(50):
    va, n = G.VM_BASE + rng.randrange(1 << 20) * PAGE, rng.randrange(1, 1500)
    start = rng.randrange(1 << 18) * PAGE if rng.random() < 0.5 else rng.randrange(1 << 8) * (2 << 20) + (va & ((2 << 20) - 1))
    pages = range(start, start + n * PAGE, PAGE)
    if not (va - start) % (2 << 20):                                      # aligned alike: 2 MiB blocks in the middle
      assert len(G._fragments(va, pages)) <= 2 * G.MAX_FRAG + n // 512 + 2
    assert G._ptes(va, pages, 1 << 39, G.PTE_RWX, False) == G._ptes(va, list(pages), 1 << 39, G.PTE_RWX, False)

def test_fragments_narrow_around_a_partial_unmap_and_a_map_over_part(dev):
  """gmc.unmap of part of a map call's pages (or a map over part of them) leaves no fragment around them that
  still claims the pages: the TLB would otherwise translate them through the fragment's first entry."""
  d, gpu, session = dev
  am = session.am
  buf = am.vram.alloc_user(4 << 20, "fragment test", align=2 << 20)
  other = am.vram.alloc_user(PAGE, "another page")
  va = G.VM_BASE + (0x3 << 32)
  frag = lambda at: (am.gmc.lookup(at) >> 7) & 0x1F
  am.gmc.map_vram(va, buf.offset, buf.size)
  try:
    am.gmc.unmap(va + 100 * PAGE, 1)
    assert am.gmc.lookup(va + 100 * PAGE) & G.PTE_VALID == 0
    assert [frag(va + p * PAGE) for p in (0, 64, 96, 99, 101, 102, 104, 112, 128, 256)] == [6, 5, 2, 2, 0, 1, 3, 4, 7, 8]
    assert frag(va + (2 << 20)) == frag(va + (4 << 20) - PAGE) == G.MAX_FRAG     # the other 2 MiB untouched
    am.gmc.map_vram(va + (3 << 20), other.offset, PAGE)                         # one page of the second 2 MiB
    assert frag(va + (3 << 20) + PAGE) == 0 and frag(va + (2 << 20)) == 8
    _fragments_hold(am, va, buf.size // PAGE)
  finally:
    am.gmc.unmap(va, buf.size // PAGE)
    am.vram.free(buf)
    am.vram.free(other)

def test_copy_in_and_out_of_a_vram_buffer_is_byte_exact_at_odd_offsets(dev):
  d, gpu, session = dev
  size = 3 * PAGE + 777
  buf = d.alloc(size)
  data = np.random.default_rng(1).integers(0, 256, size, np.uint8).tobytes()
  d.copyin(buf, data)
  d.copyin(buf, b"\xAB" * 13, offset=4093)
  want = data[:4093] + b"\xAB" * 13 + data[4106:]
  off = buf.handle.vram.offset
  assert bytes(gpu.vram[off:off + size]) == want                      # the bytes are in the mock's VRAM
  assert d.copyout(buf) == want
  for start, n in ((1, 1), (4095, 3), (5, 3 * PAGE), (size - 9, 9)):
    assert d.copyout(buf, n, offset=start) == want[start:start + n], (start, n)


def test_a_kernel_writes_a_vram_buffer(dev):
  d, gpu, session = dev
  a, b = np.arange(256, dtype=np.float32), np.full(256, 3.5, np.float32)
  dc = _vadd(d, a, b)
  off = dc.handle.vram.offset
  assert np.array_equal(np.frombuffer(bytes(gpu.vram[off:off + a.nbytes]), np.float32), a + b)
  assert np.array_equal(np.frombuffer(d.copyout(dc), np.float32), a + b)


def test_alloc_free_churn_reuses_vram_and_free_space_coalesces(dev):
  d, gpu, session = dev
  vram = session.am.vram
  bufs = [session.alloc(size) for size in (PAGE, 5 * PAGE, 64 << 10, 1 << 20, 3 * PAGE, 2 << 20)]
  base = vram.free_bytes
  for _ in range(3):                        # the same sizes again and again: the same VRAM, no growth
    for m in bufs[1::2] + bufs[::2]: session.free(m)
    bufs = [session.alloc(size) for size in (PAGE, 5 * PAGE, 64 << 10, 1 << 20, 3 * PAGE, 2 << 20)]
    assert vram.free_bytes == base
  for m in bufs[::2] + bufs[1::2]: session.free(m)
  assert vram.free_bytes == base + sum(m.size for m in bufs)
  # the allocator alone: freed in any order, the free list is what it was (neighbours merged), and every free
  # byte can be had (each free block whole, the largest first)
  blocks = list(vram._free)
  sizes = (PAGE, 7 * PAGE, 1 << 20, 3 * PAGE, 4 << 20, PAGE, 96 << 10)
  for order in ((0, 2, 4, 6, 1, 3, 5), (6, 5, 4, 3, 2, 1, 0), (3, 0, 6, 1, 5, 2, 4)):
    got = [vram.alloc_user(n, f"churn {i}") for i, n in enumerate(sizes)]
    for i in order: vram.free(got[i])
    assert vram._free == blocks
  whole = [vram.alloc_user(size, "all of it") for _, size in sorted(blocks, key=lambda b: -b[1])]
  assert vram.free_bytes == 0
  with pytest.raises(DeviceError, match="VRAM exhausted"): vram.alloc_user(PAGE, "one more page")
  for w in whole: vram.free(w)
  assert vram._free == blocks
  with pytest.raises(DeviceError, match="not a live runtime allocation"): vram.free(whole[0])


def test_vram_exhaustion_is_a_device_error_naming_the_sizes(dev):
  d, gpu, session = dev
  vram, before = session.am.vram, session.am.vram.free_bytes
  mems = len(session._mems)
  with pytest.raises(DeviceError) as e: session.alloc(1 << 30)
  msg = str(e.value)
  assert session.label in msg and "VRAM exhausted" in msg and "0x40000000 bytes" in msg, msg
  assert f"{before:#x} bytes" in msg and "largest free block" in msg, msg
  assert vram.free_bytes == before and len(session._mems) == mems        # nothing kept of the failed allocation
  assert d.alloc(PAGE).handle.vram is not None


def test_a_freed_vram_buffer_faults_when_a_kernel_touches_it(dev):
  d, gpu, session = dev
  os = d.owned_os
  vadd = d.load(demo(), "vadd")
  good, gone = d.alloc(PAGE), d.alloc(PAGE)
  va = gone.va
  assert gone.handle.vram is not None and os.memory.view_of(va) is not None     # the MMU views VRAM there
  d.free(gone)
  assert os.memory.view_of(va) is None and session.am.gmc.lookup(va) & G.PTE_VALID == 0
  from hcq.drivers.hcq import Buffer
  with pytest.raises(GPUFault, match=r"UTCL2 \(GC hub\) page fault") as e:
    vadd(good, Buffer(d, va, PAGE), good, 64, global_size=(1,), local_size=(64,), wait=True)
  assert va <= e.value.address < va + PAGE


def test_the_mock_engines_reach_vram_where_the_cpu_maps_nothing(navi_fw):
  """The USB case: the driver maps VRAM at a VA in the GPU's tables only, no CPU mapping anywhere; the mock's MMU
  makes that VA reach VRAM for its engines, and lets go when the tables drop it."""
  from hcq.drivers.amd.am.device import AMDev
  os, gpu = navi_fw
  with AMDev(os, "0000:03:00.0", os.config, until="gmc") as am:
    _power_gfx(os, am)
    buf = am.vram.alloc_user(3 * PAGE, "engine test")
    va = G.VM_BASE + (0x5 << 32)
    assert os.memory.find(va) is None and os.memory.view_of(va) is None
    am.vram.write(buf.offset + 5, b"from VRAM")
    am.gmc.map_vram(va, buf.offset, buf.size)
    assert (va, 3 * PAGE) in gpu.cp.gpu.ranges.ranges()                   # the engines may touch it
    assert os.memory.view_of(va) == (gpu.vram_fd, buf.offset, 1)          # held by the MMU alone
    assert ctypes.string_at(va + 5, 9) == b"from VRAM"                    # what an engine reads at the VA
    ctypes.memmove(va + 2 * PAGE, b"engine", 6)                           # and writes
    assert am.vram.read(buf.offset + 2 * PAGE, 6) == b"engine"
    am.gmc.unmap(va, 3)
    assert (va, 3 * PAGE) not in gpu.cp.gpu.ranges.ranges() and os.memory.view_of(va) is None


def _reserved_pages(addr: int, size: int) -> bool:
  """Whether /proc/self/maps shows [addr, addr+size) as inaccessible address space (a PROT_NONE reservation)."""
  with open("/proc/self/maps") as f:
    for line in f:
      span, perms = line.split()[:2]
      lo, hi = (int(x, 16) for x in span.split("-"))
      if lo <= addr and addr + size <= hi: return perms.startswith("---")
  return False


def test_vram_at_a_va_the_process_only_reserved_reaches_the_engines(navi_fw):
  """tinygrad reserves its GPU's whole VA range PROT_NONE (_System.reserve_va) and maps VRAM buffers there for the GPU
  only: the engines reach VRAM at such a VA (the MMU's view replaces the reserved pages), the pages are reserved
  address space again when the mapping goes, and a process that unmaps the reservation takes the view with it."""
  from hcq.drivers.amd.am.device import AMDev
  os, gpu = navi_fw
  with AMDev(os, "0000:03:00.0", os.config, until="gmc") as am:
    _power_gfx(os, am)
    buf = am.vram.alloc_user(2 * PAGE, "reserved-VA test")
    va = os.alloc_anon(8 * PAGE, addr=G.VM_BASE + (0x6 << 32), reserve_only=True)
    am.vram.write(buf.offset + 3, b"kernargs")
    am.gmc.map_vram(va + 2 * PAGE, buf.offset, 2 * PAGE)
    assert (va + 2 * PAGE, 2 * PAGE) in gpu.cp.gpu.ranges.ranges()            # the engines may touch it
    assert os.memory.view_of(va + 2 * PAGE) == (gpu.vram_fd, buf.offset, 1)
    assert ctypes.string_at(va + 2 * PAGE + 3, 8) == b"kernargs"
    am.gmc.unmap(va + 2 * PAGE, 2)
    assert os.memory.view_of(va + 2 * PAGE) is None and _reserved_pages(va, 8 * PAGE)   # reserved again
    am.gmc.map_vram(va + 2 * PAGE, buf.offset, 2 * PAGE)
    assert os.memory.view_of(va + 2 * PAGE) is not None
    os.free_anon(va, 8 * PAGE)                           # the process unmaps its reservation, the mapping still there
    assert not any(a < va + 8 * PAGE and va < a + n for a, n in gpu.cp.gpu.ranges.ranges())
    assert os.memory.view_of(va + 2 * PAGE) is None and not _reserved_pages(va, 8 * PAGE)
    am.gmc.flush_tlb()                                   # the tables unchanged: the VA is free now, viewed afresh
    assert os.memory.view_of(va + 2 * PAGE) is not None
    am.gmc.unmap(va + 2 * PAGE, 2)
    assert os.memory.find(va) is None and os.memory.view_of(va + 2 * PAGE) is None


def test_system_pages_mapped_at_another_va_reach_their_host_pages(navi_fw):
  """A system PTE holds the page's bus (pagemap physical) address: the engines reach the host page behind it at the
  VA the page tables give, wherever the CPU has it (tinygrad maps host buffers and the SMU's message page so);
  freeing the host memory takes it from their reach, and a TLB flush with the tables unchanged does not give it back."""
  from hcq.drivers.amd.am.device import AMDev
  os, gpu = navi_fw
  with AMDev(os, "0000:03:00.0", os.config, until="gmc") as am:
    _power_gfx(os, am)
    sm = am.pci.alloc_sysmem(3 * PAGE)                      # at a host address of the kernel's choosing
    va = G.VM_BASE + (0x5 << 32)
    assert sm.addr != va
    ctypes.memmove(sm.addr + PAGE + 8, b"host page", 9)
    am.gmc.map(va, sm.paddrs, system=True)
    reached = lambda: [(a, n) for a, n in gpu.cp.gpu.ranges.ranges() if a < va + 3 * PAGE and va < a + n]
    assert reached() == [(va, 3 * PAGE)] and os.memory.view_of(va) == (None, sm.addr, 1)
    assert ctypes.string_at(va + PAGE + 8, 9) == b"host page"          # what an engine reads at the VA
    ctypes.memmove(va + 2 * PAGE, b"DMA", 3)                           # and writes
    assert ctypes.string_at(sm.addr + 2 * PAGE, 3) == b"DMA"
    am.pci.free_sysmem(sm)
    assert reached() == [] and os.memory.view_of(va) is None
    am.gmc.flush_tlb()
    assert reached() == []
    am.gmc.unmap(va, 3)


def test_a_huge_vram_entry_starts_at_its_address_aligned_or_not(navi_fw):
  """A directory entry that is itself a PTE (PDE_PTE) spans 2 MiB from the address it holds: tinygrad 0.14 (real RX
  7900 XTX boards) writes such entries for VRAM that is not 2 MiB-aligned (its kernel-argument buffer), so the walker
  adds the VA's offset in the page and masks none of the address off (blocks.PDE_PTE)."""
  from hcq.drivers.amd.am.device import AMDev
  from hcq.mockgpu.amd.am.blocks import PDE_PTE
  os, gpu = navi_fw
  with AMDev(os, "0000:03:00.0", os.config, until="gmc") as am:
    _power_gfx(os, am)
    buf = am.vram.alloc_user(4 << 20, "huge entry test")
    start = ((buf.offset + (1 << 21) - 1) & ~((1 << 21) - 1)) + 0x34000   # 2 MiB + 0x34000 into it: unaligned
    assert start + (2 << 20) <= buf.offset + buf.size and start % (2 << 20)
    va = G.VM_BASE + (0x5 << 32)
    rel = va - G.VM_BASE
    am.gmc._table_of(rel)
    table = am.gmc.root.offset
    for level in (3, 2):
      table = (am.gmc._entry(table, (rel >> (12 + 9 * level)) & 0x1FF) & G.ADDR_MASK) - am.gmc.vram_base
    am.gmc._set(table, (rel >> 21) & 0x1FF, am.gmc.pa(start) | G.PTE_VALID | G.PTE_RWX | PDE_PTE)
    am.gmc.flush_tlb()
    assert gpu.gchub.translate(va + 0x1234) == ("vram", start + 0x1234)
    am.vram.write(start + 0x1234, b"unaligned")
    assert (va, 2 << 20) in gpu.cp.gpu.ranges.ranges()
    assert ctypes.string_at(va + 0x1234, 9) == b"unaligned"             # what an engine reads at the VA
    am.gmc._set(table, (rel >> 21) & 0x1FF, 0)
    am.gmc.flush_tlb()


def test_a_mode1_reset_takes_every_mapping_from_the_mock_engines(navi_fw):
  """After a reset the hubs are off: the engines reach nothing, and the MMU's views of VRAM are let go (a VA mapped
  again later to other VRAM is viewed afresh)."""
  from hcq.drivers.amd.am.device import AMDev
  os, gpu = navi_fw
  with AMDev(os, "0000:03:00.0", os.config, until="gmc") as am:
    _power_gfx(os, am)
    buf = am.vram.alloc_user(2 * PAGE, "reset test")
    va = G.VM_BASE + (0x5 << 32)
    am.gmc.map_vram(va, buf.offset, 2 * PAGE)
    assert (va, 2 * PAGE) in gpu.cp.gpu.ranges.ranges() and os.memory.view_of(va) is not None
    gpu.mode1_reset("test")
    assert gpu.cp.gpu.ranges.ranges() == [] and os.memory.view_of(va) is None
    assert not os.memory._views

def test_a_huge_system_entry_reaches_only_host_memory_the_mock_knows(navi_fw):
  """A directory entry that is itself a PTE (PDE_PTE) of system memory spans 2 MiB: the engines may reach it only
  where every page is host memory at its own address (else an access past the first page would touch unmapped host
  memory and end the Python process)."""
  from hcq.drivers.amd.am.device import AMDev
  from hcq.mockgpu.amd.am.blocks import PDE_PTE
  os, gpu = navi_fw
  with AMDev(os, "0000:03:00.0", os.config, until="gmc") as am:
    _power_gfx(os, am)
    va = G.VM_BASE + (0x5 << 32)
    os.alloc_anon(PAGE, addr=va)                       # one page of host memory at the VA, the 2 MiB around it unknown
    rel = va - G.VM_BASE
    am.gmc._table_of(rel)
    table = am.gmc.root.offset
    for level in (3, 2):                               # down to the directory whose entries span 2 MiB
      table = (am.gmc._entry(table, (rel >> (12 + 9 * level)) & 0x1FF) & G.ADDR_MASK) - am.gmc.vram_base
    am.gmc._set(table, (rel >> 21) & 0x1FF, os.phys_addrs(va, PAGE)[0] | G.PTE_VALID | G.PTE_SYSTEM | PDE_PTE)
    am.gmc.flush_tlb()
    assert not any(a <= va < a + size for a, size in gpu.cp.gpu.ranges.ranges())

def test_host_memory_freed_before_its_unmap_is_out_of_the_engines_reach(navi_fw):
  """A driver that frees system memory its page tables still map: the engines stop reaching it at the free (a GPU
  fault from then on, never a touch of unmapped host memory), and a TLB flush with the tables unchanged does not
  give it back."""
  from hcq.drivers.amd.am.device import AMDev
  os, gpu = navi_fw
  with AMDev(os, "0000:03:00.0", os.config, until="gmc") as am:
    _power_gfx(os, am)
    va = G.VM_BASE + (0x5 << 32)
    sm = am.pci.alloc_sysmem(2 * PAGE, addr=va)
    am.gmc.map(va, sm.paddrs, system=True)
    reached = lambda: [(a, n) for a, n in gpu.cp.gpu.ranges.ranges() if a < va + 2 * PAGE and va < a + n]
    assert reached() == [(va, 2 * PAGE)]
    am.pci.free_sysmem(sm)                          # the PTEs still say system pages at va
    assert reached() == []
    am.gmc.flush_tlb()
    assert reached() == []
    am.gmc.unmap(va, 2)

def test_cpu_access_maps_the_vram_bar_at_the_buffer_va(dev):
  d, gpu, session = dev
  os = d.owned_os
  mem = session.alloc(2 * PAGE + 1, cpu_access=True)
  assert mem.cpu is not None and mem.view is not None
  mem.cpu[PAGE - 2:PAGE + 2] = b"edge"
  assert bytes(gpu.vram[mem.vram.offset + PAGE - 2:mem.vram.offset + PAGE + 2]) == b"edge"
  assert os.memory.view_of(mem.va)[2] == 2                               # the CPU view and the MMU's, one mapping
  session.free(mem)
  assert os.memory.view_of(mem.va) is None


def test_map_pci_resource_checks_alignment_and_the_bar(navi):
  os, gpu = navi
  path = "/sys/bus/pci/devices/0000:03:00.0/resource0"
  va = G.VM_BASE + (0x6 << 32)
  with pytest.raises(DeviceError, match=r"address 0x200600000001.*page size"): os.map_pci_resource(path, va + 1, PAGE, 0)
  with pytest.raises(DeviceError, match=r"offset 0x800"): os.map_pci_resource(path, va, PAGE, 0x800)
  with pytest.raises(DeviceError, match=r"address 0x0:.*positive"): os.map_pci_resource(path, 0, PAGE, 0)
  with pytest.raises(OSCallError, match="outside BAR0"): os.map_pci_resource(path, va, 2 * PAGE, gpu.vram_size - PAGE)
  with pytest.raises(OSCallError, match="not memory"):
    os.map_pci_resource("/sys/bus/pci/devices/0000:03:00.0/resource5", va, PAGE, 0)
  from hcq.drivers.system.pci import PCIDevice
  pci = PCIDevice(os, "0000:03:00.0")
  with pytest.raises(DeviceError, match=r"0x1ffff000\+0x2000 is outside BAR 0"):
    pci.map_bar_at(0, va, 2 * PAGE, gpu.vram_size - PAGE)
  view = pci.map_bar_at(0, va, PAGE, 2 * PAGE)
  view.write32(8, 0x12345678)
  assert bytes(gpu.vram[2 * PAGE + 8:2 * PAGE + 12]) == (0x12345678).to_bytes(4, "little")
  with pytest.raises(DeviceError, match="already held"): pci.map_bar_at(0, va, PAGE, 2 * PAGE)
  with pytest.raises(DeviceError, match="another view"): pci.map_bar_at(0, va, PAGE, 3 * PAGE)
  view.close()
  assert os.memory.view_of(va) is None


def test_linux_map_pci_resource_maps_the_file_at_the_address(tmp_path):
  from hcq.drivers.system import LinuxOS, libc
  path = tmp_path / "resource0"
  path.write_bytes(bytes(4 * PAGE))
  lo = LinuxOS(Config())
  addr = lo.alloc_anon(2 * PAGE)
  lo.free_anon(addr, 2 * PAGE)                 # a free address
  with pytest.raises(DeviceError, match="page size"): lo.map_pci_resource(str(path), addr, PAGE, 0x10)
  for bad in (0, -PAGE):            # never at NULL (which root may map) nor a negative address
    with pytest.raises(DeviceError, match=rf"address {bad:#x}:.*positive"): lo.map_pci_resource(str(path), bad, PAGE, 0)
  with pytest.raises(DeviceError, match=r"0x3000\+0x2000 is outside the BAR's 0x4000"):
    lo.map_pci_resource(str(path), addr, 2 * PAGE, 3 * PAGE)
  view = lo.map_pci_resource(str(path), addr, 2 * PAGE, PAGE, name="fake BAR0")
  assert view.addr == addr
  ctypes.memmove(addr + 3, b"bar", 3)
  assert path.read_bytes()[PAGE + 3:PAGE + 6] == b"bar"
  with pytest.raises(OSCallError): lo.map_pci_resource(str(path), addr, PAGE, 0)   # never over a live mapping
  view.close()
  assert libc.PAGE_SIZE == PAGE


def test_a_fixed_mapping_at_address_0_is_refused_before_mmap():
  """mmap(NULL, MAP_FIXED_NOREPLACE) maps page 0 for a privileged process; hcq never asks for it."""
  from hcq.drivers.system import libc
  for flag in (libc.MAP_FIXED, libc.MAP_FIXED_NOREPLACE):
    with pytest.raises(OSCallError) as e:
      libc.mmap(0, PAGE, libc.PROT_READ | libc.PROT_WRITE, libc.MAP_PRIVATE | libc.MAP_ANONYMOUS | flag)
    assert e.value.errno == errno.EINVAL and "needs an address" in str(e.value)
  # what ctypes would truncate: an address of 2^70 (NULL), a size past 2^64 (a page), an offset past a C long
  for addr, size, offset in ((1 << 70, PAGE, 0), (None, (1 << 64) + PAGE, 0), ((1 << 64) - PAGE, 2 * PAGE, 0),
                             (None, PAGE, 1 << 64)):
    with pytest.raises(OSCallError, match="do not fit the call"):
      libc.mmap(addr, size, libc.PROT_READ, libc.MAP_PRIVATE | libc.MAP_ANONYMOUS | (libc.MAP_FIXED_NOREPLACE if addr else 0),
                offset=offset)
  with open("/proc/self/maps") as f: assert not any(line.startswith("00000000-") for line in f)

def test_host_memory_views_stay_while_any_holder_holds_them(navi):
  """The driver's CPU view and the MMU's view of the same pages: whichever lets go first, the other keeps them."""
  os, gpu = navi
  va, a, b = G.VM_BASE + (0x7 << 32), object(), object()
  os.memory.map_view(gpu.vram_fd, 4 * PAGE, va, 2 * PAGE, a, "test view")
  os.memory.map_view(gpu.vram_fd, 5 * PAGE, va + PAGE, PAGE, b, "test view")
  gpu.vram[5 * PAGE:5 * PAGE + 2] = b"ok"
  os.memory.unmap_view(va, 2 * PAGE, a)
  assert os.memory.view_of(va) is None and ctypes.string_at(va + PAGE, 2) == b"ok"
  with pytest.raises(DeviceError, match="no physical address"): os.phys_addrs(va + PAGE, PAGE)
  os.memory.unmap_view(va + PAGE, PAGE, b)
  assert os.memory.view_of(va + PAGE) is None


def test_close_frees_every_vram_buffer_and_every_view(fw_dir):
  from hcq.drivers.amd import open_device
  from hcq.mockgpu import mock_navi31_os
  with mock_navi31_os(Config(timeout_s=5, firmware_dir=fw_dir)) as osi:
    d = open_device("PCI", 0, osi, osi.config)
    vram = d.session.am.vram
    bufs = [d.alloc(n) for n in (PAGE, 3 * PAGE, 1 << 20)]
    d.session.alloc(PAGE, cpu_access=True)
    assert len(vram.user) >= 4 and osi.memory._views
    d.close()
    assert vram.user == {} and osi.memory._views == {}        # the CPU views and the MMU's, all gone
    assert all(b.handle.vram is not None for b in bufs)


def test_mapping_where_the_directories_exist_reads_no_directory_back(dev):
  """The GMC knows the directory entries it wrote: finding a page table reads none of them back from VRAM (each read
  is 2 USB transfers behind a bridge); a map reads at most the two PTEs next to its range (fragment narrowing)."""
  d, gpu, session = dev
  am = session.am
  first = session.alloc(PAGE, kind="vram")          # its directories exist from now on
  reads = []
  real = am.vram.read
  am.vram.read = lambda off, size: (reads.append((off, size)), real(off, size))[1]
  try:
    second = session.alloc(PAGE, kind="vram")       # the VA next to it: the same directories and page table
  finally: am.vram.read = real
  assert second.va >> 21 == first.va >> 21 or second.va >> 21 == (first.va >> 21) - 1
  assert len(reads) <= 2 and all(size == 8 for _off, size in reads), reads
  assert am.gmc.lookup(second.va) & G.PTE_VALID
  session.free(second)
  session.free(first)
