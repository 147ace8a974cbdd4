"""The AM driver's life cycle beyond one boot (issue 15): two AM devices in one process, the IH ring's overflow, wrong
firmware files, thread safety, the order of close, an absent or unanswering PCI function."""
import ctypes
import os as _os
import struct

import numpy as np
import pytest

from hcq.config import Config


def demo():
  path = _os.path.join(_os.path.dirname(__file__), "..", "..", "..", "drivers", "amd", "kernels", "demo.hsaco")
  with open(path, "rb") as f: return f.read()


def _vadd(dev, n=256):
  vadd = dev.load(demo(), "vadd")
  a, b = np.arange(n, dtype=np.float32), np.full(n, 2.0, np.float32)
  da, db, dc = dev.alloc(a.nbytes), dev.alloc(b.nbytes), dev.alloc(a.nbytes)
  dev.copyin(da, a)
  dev.copyin(db, b)
  vadd(da, db, dc, n, global_size=(1,), local_size=(n,), wait=True)
  assert np.array_equal(np.frombuffer(dev.copyout(dc), np.float32), a + b)


def test_two_am_devices_in_one_process_run_kernels(fw_dir):
  """Each AMSession used to start its VA allocator at the same address: the second device's first fixed mapping
  failed with "File exists". GPU VAs now come from one process-wide allocator."""
  from hcq.drivers.amd import open_device
  from hcq.mockgpu import mock_navi31_os
  with mock_navi31_os(Config(timeout_s=5, firmware_dir=fw_dir), gpus=2) as osi:
    d0 = open_device("PCI", 0, osi, osi.config)
    try:
      d1 = open_device("PCI", 1, osi, osi.config)
      try:
        assert d0.session.mailbox_va != d1.session.mailbox_va
        _vadd(d0)
        _vadd(d1)
      finally: d1.close()
      _vadd(d0)
    finally: d0.close()


def test_va_space_reuses_freed_ranges_and_merges_neighbours():
  from hcq.drivers.amd.am.va import VASpace
  from hcq.errors import DeviceError
  vs = VASpace(0x10000, 0x10000 + 8 * 0x1000)
  a, b, c = vs.alloc(0x1000, "t"), vs.alloc(0x1000, "t"), vs.alloc(0x1000, "t")
  assert (a, b, c) == (0x10000, 0x12000, 0x14000)          # a guard page after each
  with pytest.raises(DeviceError, match="t: GPU VA range .* exhausted"): vs.alloc(0x2000, "t")
  vs.free(b, 0x1000)
  vs.free(a, 0x1000)
  assert vs.alloc(0x3000, "t") == a                          # a and b merged
  vs.free(c, 0x1000)
  vs.free(a, 0x3000)
  assert vs._free == [(0x10000, 8 * 0x1000)]


def test_ih_poll_ends_after_the_ring_overflowed(navi):
  """With WPTR_OVERFLOW_ENABLE bit 0 of the written-back write pointer says the ring overflowed: poll used to take
  it for part of the offset and never caught up with it. Now it resumes at the oldest intact entry, clears the flag,
  and later entries are read normally."""
  import threading
  from hcq.drivers.amd.am.device import AMDev
  from hcq.drivers.amd.am.ih import ENTRY, RING_SIZE
  os, gpu = navi
  with AMDev(os, "0000:03:00.0", os.config, until="ih") as d:
    n = RING_SIZE // ENTRY + 10
    for i in range(n): assert gpu.ih.post(client=0x14, src=181, ctx=[i, 0, 0, 0])
    assert gpu.ih.overflow
    got = []
    t = threading.Thread(target=lambda: got.append(d.ih.poll()), daemon=True)
    t.start()
    t.join(10)
    assert not t.is_alive(), "IH poll did not end after an overflow"
    entries = got[0]
    assert len(entries) == RING_SIZE // ENTRY - 1 and entries[-1]["data"][0] == n - 1     # the newest ones, in order
    assert [e["data"][0] for e in entries] == list(range(n - len(entries), n))
    assert d.ih.overflows == 1 and not gpu.ih.overflow
    gpu.ih.post(client=0x14, src=181, ctx=[12345, 0, 0, 0])
    assert [e["data"][0] for e in d.ih.poll()] == [12345] and d.ih.overflows == 1


def _swap(navi_fw, fw_dir, name, data):
  navi_fw[0].vfs.add_file(_os.path.join(navi_fw[0].config.firmware_dir, name), bytes(data), replace=True)


def _read(fw_dir, name):
  with open(_os.path.join(fw_dir, name), "rb") as f: return bytearray(f.read())


@pytest.mark.parametrize("target, source, ip", [
  ("gc_11_0_0_rlc.bin", "navi10_rlc.bin", r"ip_version 10\.1, but the file is loaded for GC 11\.0\.0"),
  ("sdma_6_0_0.bin", "navi10_sdma.bin", r"ip_version 5\.0, but the file is loaded for SDMA0 6\.0\.0"),
])
def test_a_firmware_file_of_another_gpu_names_the_file_and_its_ip_version(navi_fw, fw_dir, target, source, ip):
  """The header's ip_version is checked against the discovery table before any image is cut from the file."""
  from hcq.drivers.amd.am.device import AMDev
  from hcq.errors import DeviceError
  _swap(navi_fw, fw_dir, target, _read(fw_dir, source))
  os, _ = navi_fw
  with pytest.raises(DeviceError, match=rf"{target}: {ip} \(expected ip_version \d+\.0\)"):
    AMDev(os, "0000:03:00.0", os.config)
  assert os.held_locks() == []


def test_an_sos_container_without_its_toc_is_refused_before_the_bootloader(navi_fw, fw_dir):
  from hcq.drivers.amd.am import firmware
  from hcq.drivers.amd.am.device import AMDev
  from hcq.errors import DeviceError
  data = _read(fw_dir, "psp_13_0_0_sos.bin")
  fw = firmware.parse("psp_13_0_0_sos.bin", bytes(data))
  table = ctypes.sizeof(firmware.U.struct_psp_firmware_header_v2_0)
  desc = ctypes.sizeof(firmware.U.struct_psp_fw_bin_desc)
  i = [c["name"] for c in fw.components].index("PSP_FW_TYPE_PSP_TOC")
  struct.pack_into("<I", data, table + i * desc + firmware.U.struct_psp_fw_bin_desc.fw_type.offset, 0x7E)
  _swap(navi_fw, fw_dir, "psp_13_0_0_sos.bin", data)
  os, gpu = navi_fw
  with pytest.raises(DeviceError, match=r"psp_13_0_0_sos.bin has no PSP_FW_TYPE_PSP_TOC component"):
    AMDev(os, "0000:03:00.0", os.config)
  assert gpu.psp.bl_loaded == []          # refused before the bootloader started


def test_a_ta_file_as_the_sos_is_refused_at_once(navi_fw, fw_dir):
  import time
  from hcq.drivers.amd.am.device import AMDev
  from hcq.errors import DeviceError
  _swap(navi_fw, fw_dir, "psp_13_0_0_sos.bin", _read(fw_dir, "psp_13_0_0_ta.bin"))
  os, gpu = navi_fw
  with pytest.raises(DeviceError, match=r"psp_13_0_0_sos.bin has no PSP_FW_TYPE_PSP_SYS_DRV component .*not a PSP sOS container"):
    AMDev(os, "0000:03:00.0", os.config)
  assert gpu.psp.bl_loaded == []          # refused before the bootloader got anything: nothing was waited for


def _hammer(n_threads, fn):
  """Run fn(t) in n threads at once with a tiny switch interval (races show up); the errors they raised."""
  import sys
  import threading
  errors, start = [], threading.Barrier(n_threads)
  def run(t):
    try:
      start.wait()
      fn(t)
    except BaseException as e:   # noqa: BLE001 - reported by the test
      errors.append(f"thread {t}: {type(e).__name__}: {e}")
  old = sys.getswitchinterval()
  sys.setswitchinterval(1e-6)
  try:
    threads = [threading.Thread(target=run, args=(t,)) for t in range(n_threads)]
    for th in threads: th.start()
    for th in threads: th.join(60)
  finally: sys.setswitchinterval(old)
  return errors


def test_indirect_register_access_from_threads_keeps_index_and_data_together(navi):
  """MM_INDEX then MM_DATA is a pair: another thread's index between them made a read return another register."""
  from hcq.drivers.amd.am.device import AMDev
  os, gpu = navi
  with AMDev(os, "0000:03:00.0", os.config, until="ih") as d:
    far = [d.access.limit + 0x100 * (t + 1) for t in range(4)]
    for t, a in enumerate(far): gpu.regs.poke(a, 0x1000 + t)
    def work(t):
      for _ in range(3000):
        v = d.access.read(far[t])
        assert v == 0x1000 + t, f"read {far[t]:#x} gave {v:#x}"
    assert _hammer(4, work) == []


def test_am_iface_alloc_free_and_interrupts_from_threads(fw_dir):
  """AMSession's alloc, free (page tables made on first use, TLB flushes) and the IH read pointer used by several
  threads at once, outside AMDDevice's lock: every page stays mapped to its memory, the IH delivers each entry once."""
  import hcq
  with hcq.open("MOCKPCI+AMD", config=Config(timeout_s=5, firmware_dir=fw_dir)) as dev:
    gpu, session = dev.owned_os.devices[0], dev.session
    mems = [[] for _ in range(4)]
    def alloc(t):
      for r in range(12):
        # each in a new page table, made while others are made too; VRAM and host memory in turn
        mems[t].append(session.alloc(2 << 20, kind="vram" if (t + r) % 2 else "gtt"))
        if r % 3 == 2: session.free(mems[t].pop(0))
    assert _hammer(4, alloc) == []
    for m in sum(mems, []):
      for off in range(0, m.size, 0x80000):
        want = ("vram", m.vram.offset + off) if m.vram else ("system", session.os.phys_addrs(m.va + off, 0x1000)[0])
        assert gpu.gchub.translate(m.va + off) == want, hex(m.va)
    for m in sum(mems, []): session.free(m)
    n, seen = 2000, []
    for i in range(n): gpu.ih.post(client=0x14, src=181, ctx=[i, 0, 0, 0])
    def poll(t):
      for _ in range(200): seen.extend(e["data"][0] for e in session.am.ih.poll())
    assert _hammer(4, poll) == []
    assert sorted(seen) == list(range(n))
    _vadd(dev)


def test_am_device_launches_and_frees_from_threads(fw_dir):
  import hcq
  with hcq.open("MOCKPCI+AMD", config=Config(timeout_s=20, firmware_dir=fw_dir, mock_threaded=True)) as dev:
    def work(t):
      for _ in range(3):
        _vadd(dev, 64 * (t + 1))
    assert _hammer(3, work) == []


def test_close_dequeues_the_compute_queue_waits_for_sdma_and_turns_bus_mastering_off(fw_dir):
  """close used to clear CP_HQD_ACTIVE (not a dequeue: the CP may still run the queue). Now: DEQUEUE_REQUEST, a
  bounded wait for ACTIVE == 0, the SDMA ring off and idle, then the memory goes and bus mastering is turned off."""
  import hcq
  from hcq.autogen import pci as pci_regs
  from hcq.mockgpu.amd.am.discovery import GC_HWID, SDMA0_HWID
  dev = hcq.open("MOCKPCI+AMD", config=Config(timeout_s=5, firmware_dir=fw_dir))
  gpu = dev.owned_os.devices[0]
  _vadd(dev)
  rf = gpu.regs
  names = {rf.addr(GC_HWID, "gc_11_0_0", n): n for n in ("GRBM_GFX_CNTL", "CP_HQD_DEQUEUE_REQUEST", "CP_HQD_ACTIVE")}
  names.update({rf.addr(SDMA0_HWID, "sdma_6_0_0", n): n for n in ("SDMA0_QUEUE0_RB_CNTL", "SDMA0_STATUS_REG")})
  log, write, read = [], rf.write, rf.read
  rf.write = lambda a, v: (log.append(("w", names[a], v)) if a in names else None, write(a, v))[1]
  rf.read = lambda a: (log.append(("r", names[a])) if a in names else None, read(a))[1]
  dev.close()
  ops = [op[:2] for op in log]
  assert ("w", "CP_HQD_ACTIVE") not in ops
  i = ops.index(("w", "CP_HQD_DEQUEUE_REQUEST"))
  assert log[i - 1] == ("w", "GRBM_GFX_CNTL", 0x4) and ops[i + 1] == ("r", "CP_HQD_ACTIVE")   # me 1 selected
  j = ops.index(("w", "SDMA0_QUEUE0_RB_CNTL"))
  assert j > i and ("r", "SDMA0_STATUS_REG") in ops[j:]
  assert not gpu.function.command & pci_regs.PCI_COMMAND_MASTER
  assert not gpu.cp.queues


def test_dpm_levels_leave_out_bit_31(navi_fw):
  """The SMU sets bit 31 of GetDpmFreqByIndex answers (fine-grained / discrete DPM): the count 0x80000003 used to be
  taken as two billion levels (the SMU fails the fourth), and every frequency had 2^31 added."""
  from hcq.autogen.amd import smu_v13_0_0 as S
  from hcq.drivers.amd.am.device import AMDev
  os, _ = navi_fw
  with AMDev(os, "0000:03:00.0", os.config) as d:
    assert d.smu.dpm_levels(S.PPCLK_UCLK) == [96, 456, 1249]
    assert d.smu.dpm_levels(S.PPCLK_GFXCLK) == [500, 1500, 2500]


def test_ih_poll_writes_the_read_pointer_only_when_it_moved(navi):
  from hcq.drivers.amd.am.device import AMDev
  os, gpu = navi
  with AMDev(os, "0000:03:00.0", os.config, until="ih") as d:
    rptr, writes = gpu.ih.a["IH_RB_RPTR"], []
    gpu.regs.hook(rptr, write=writes.append)
    for _ in range(5): assert d.ih.poll() == []
    assert writes == []
    gpu.ih.post(client=0x14, src=181, ctx=[1, 0, 0, 0])
    assert len(d.ih.poll()) == 1 and d.ih.poll() == []
    assert writes == [32]


def test_unmap_walks_the_directories_once_per_2mib(navi):
  from hcq.drivers.amd.am import gmc as G
  from hcq.drivers.amd.am.device import AMDev
  os, gpu = navi
  with AMDev(os, "0000:03:00.0", os.config, until="ih") as d:
    va, pages = G.VM_BASE + (3 << 20), 1024                     # 4 MiB from the middle of a 2 MiB: three tables
    buf = d.vram.alloc(pages * 0x1000, "test")
    d.gmc.map(va, [buf.offset + i * 0x1000 for i in range(pages)], system=False)
    reads, entry = [], d.gmc._entry
    d.gmc._entry = lambda t, i: (reads.append(i), entry(t, i))[1]
    d.gmc.unmap(va, pages)
    assert len(reads) <= 3 * 3 + 2           # 3 levels for each table, and the PTE next to each end (its fragment)
    for off in (0, 0x1000, (pages - 1) * 0x1000):
      with pytest.raises(Exception): gpu.gchub.translate(va + off)


def test_mock_remap_rederives_only_changed_page_tables(fw_dir):
  """The mock walked every page table at each TLB flush (13 ms an alloc/free pair at boot size); now a table whose
  bytes did not change keeps its ranges, and the result equals a full walk."""
  import hcq
  with hcq.open("MOCKPCI+AMD", config=Config(timeout_s=5, firmware_dir=fw_dir)) as dev:
    cp, session = dev.owned_os.devices[0].cp, dev.session
    calls, ranges_of = [], cp._ranges_of
    cp._ranges_of = lambda *a: (calls.append(a[1]), ranges_of(*a))[1]
    m = session.alloc(0x4000)
    assert 1 <= len(calls) <= 2 * 2                     # map and its flush: the one or two tables it touched
    incremental = list(cp.mapped)
    cp._tables.clear()
    cp.remap()
    assert cp.mapped == incremental and any(va <= m.va < va + size for va, size in cp.mapped)
    session.free(m)
    assert not any(va <= m.va < va + size for va, size in cp.mapped)
    _vadd(dev)


def test_psp_staging_clears_only_the_previous_images_tail(navi_fw):
  from hcq.drivers.amd.am.device import AMDev
  from hcq.drivers.amd.am.psp import MSG1_SIZE
  os, _ = navi_fw
  with AMDev(os, "0000:03:00.0", os.config) as d:
    psp, vram = d.psp, d.vram
    fills, fill, prev = [], vram.fill, psp._staged          # the boot's last image
    vram.fill = lambda off, size, byte=0: (fills.append(size), fill(off, size, byte))[1]
    psp._stage(b"\xAA" * 5000)
    psp._stage(b"\x55" * 100)
    assert fills == [prev - 5000, 5000 - 100]             # not the whole 1 MiB each time
    assert vram.read(psp.msg1.offset, 5000) == b"\x55" * 100 + bytes(4900)
    assert 5000 < prev < MSG1_SIZE


def test_one_copy_each_of_sysmem_allocation_memsize_address_and_block_list(fw_dir):
  """AMSession's memory is AMPCI.alloc_sysmem's (one place pins pages and finds their physical addresses), the early
  RCC_CONFIG_MEMSIZE address is the generated register's, and `hcq am boot --until` offers AMDev.BLOCKS."""
  import argparse
  import hcq
  from hcq.cli import am as cli_am
  from hcq.drivers.amd.am import block, device, nbio
  assert not hasattr(cli_am, "BLOCKS") and not hasattr(nbio.NBIO, "vram_size")
  p = argparse.ArgumentParser()
  cli_am.register(p.add_subparsers())
  until = next(a for a in p._subparsers._group_actions[0].choices["am"]._subparsers._group_actions[0]
               .choices["boot"]._actions if a.dest == "until")
  assert tuple(until.choices) == device.AMDev.BLOCKS == block.BLOCKS
  with hcq.open("MOCKPCI+AMD", config=Config(timeout_s=5, firmware_dir=fw_dir)) as dev:
    am = dev.session.am
    assert device.NBIO_SEGMENT2_EARLY + 0xC3 == am.nbio_regs.addr("RCC_DEV0_EPF0_RCC_CONFIG_MEMSIZE")
    m = dev.session.alloc(0x3000, kind="gtt")
    assert m.sysmem in am.pci._sysmem and m.sysmem.addr == m.va and m.sysmem.size == m.size
    dev.session.free(m)
    assert m.sysmem not in am.pci._sysmem


def test_hcq_am_boot_of_an_absent_pci_function_says_so(capsys, monkeypatch, tmp_path):
  from hcq.cli import main as hcq_main
  (tmp_path / "bus" / "pci" / "devices").mkdir(parents=True)
  monkeypatch.setenv("HCQ_SYSFS_ROOT", str(tmp_path))
  assert hcq_main(["am", "boot", "--pci", "0000:99:00.0"]) == 1
  err = capsys.readouterr().err
  assert "no PCI function 0000:99:00.0" in err and "Errno" not in err and "Traceback" not in err


def test_an_absent_pci_function_is_named_by_the_pci_layer(navi):
  from hcq.drivers.system.pci import PCIDevice
  from hcq.errors import DeviceError
  os, _ = navi
  with pytest.raises(DeviceError, match=r"^no PCI function 0000:99:00.0 \(nothing at .*0000:99:00.0\)$"):
    PCIDevice(os, "0000:99:00.0").vendor


def test_all_ones_register_reads_say_the_gpu_is_not_answering(navi):
  from hcq.drivers.amd.am.device import AMDev
  from hcq.errors import DeviceError
  from hcq.mockgpu.amd.am.discovery import NBIF_HWID
  os, gpu = navi
  rf = gpu.regs
  rf.hook(rf.addr(NBIF_HWID, "nbio_4_3_0", "RCC_DEV0_EPF0_RCC_CONFIG_MEMSIZE"), read=lambda: 0xFFFFFFFF)
  with pytest.raises(DeviceError) as e: AMDev(os, "0000:03:00.0", os.config, until="ih")
  assert "0xffffffff" in str(e.value) and "not answering" in str(e.value) and "resizable BAR" not in str(e.value)
  assert os.held_locks() == []
