"""The QCOM driver over KGSL on the mock: CP packets as data (parity, decoding), the queue programs' packets, the KGSL model's
answers to bad requests, and submissions that fault or never signal (a clear error within the timeout)."""
from __future__ import annotations

import errno
import struct
import time

import pytest

from tests.hangguard import ends

import hcq
from hcq.autogen.qcom import a6xx, adreno_pm4, msm_kgsl as K
from hcq.config import Config
from hcq.drivers.qcom import cp, packets
from hcq.drivers.qcom.program import Kernel
from hcq.errors import DeviceError, GPUFault, OSCallError, Timeout

END = 0x0300000000000000           # "end" (Mesa's disasm.c vector)


def ones(v: int) -> int: return bin(v).count("1")


# ---- packets
def test_type4_and_type7_headers_carry_odd_parity():
  for n in range(1, 128):
    h = cp.pkt4(0xA9B0, *range(n))[0]
    assert h >> 28 == 4 and h & 0x7F == n and (h >> 8) & 0x3FFFF == 0xA9B0
    assert (ones(n) + (h >> 7 & 1)) % 2 == 1 and (ones(0xA9B0) + (h >> 27 & 1)) % 2 == 1
  for opcode in range(128):
    for n in (0, 1, 3, 0x3FFF):
      h = cp.pkt7(opcode, *([0] * n))[0]
      assert h >> 28 == 7 and h & 0x3FFF == n and (h >> 16) & 0x7F == opcode
      assert (ones(n) + (h >> 15 & 1)) % 2 == 1 and (ones(opcode) + (h >> 23 & 1)) % 2 == 1
  assert cp.wait_for_idle() == [0x70268000]       # CP_WAIT_FOR_IDLE (0x26), no body: the header freedreno emits


def test_decode_names_packets_and_registers():
  words = cp.pkt4(a6xx.REG_A6XX_SP_CS_INSTRLEN, 3) + cp.exec_cs(4, 1, 1) + cp.mem_write(0x1000, 7)
  got = cp.decode(words)
  assert got[0] == (0, "PKT4", ["SP_CS_INSTRLEN=0x3"])
  assert got[1][1:] == ("CP_EXEC_CS", ["0x0", "0x4", "0x1", "0x1"])
  assert got[2][1] == "CP_MEM_WRITE"
  bad = list(words)
  bad[2] ^= 1 << 15                                # the count's parity bit of CP_EXEC_CS
  with pytest.raises(cp.DecodeError, match="dword 2: .*bad parity") as e: cp.decode(bad)
  assert len(e.value.packets) == 1
  with pytest.raises(cp.DecodeError, match="needs 4 body dwords"): cp.decode(words[:4])


def test_lowering_uses_the_rnndb_opcodes_and_registers():
  assert packets.ALWAYS_ON_COUNTER == a6xx.REG_A6XX_CP_ALWAYS_ON_COUNTER
  with hcq.open("MOCK+QCOM") as dev:
    got = cp.decode(list(dev.compute.signal_cmd.fill({("var", "timeline"): (7 << 32) | 5})))
    assert [p[1] for p in got] == ["CP_WAIT_FOR_IDLE", "CP_EVENT_WRITE", "CP_EVENT_WRITE"]
    lo_ev, hi_ev = got[1][2], got[2][2]
    # a fence value without TIMESTAMP (bit 30 would write the GPU's clock: adreno_pm4.xml), low word first
    assert int(lo_ev[0], 16) == adreno_pm4.CACHE_FLUSH_TS and lo_ev[3] == "0x5"
    assert int(hi_ev[0], 16) == adreno_pm4.CACHE_FLUSH_TS and hi_ev[3] == "0x7"
    assert int(hi_ev[1], 16) == int(lo_ev[1], 16) + 4
    wait = cp.decode(list(dev.compute.wait_cmd.fill({("var", "prev"): 9})))
    assert [p[1] for p in wait] == ["CP_WAIT_REG_MEM"] and wait[0][2][3] == "0x9"


# ---- the KGSL model's answers
@pytest.fixture
def kgsl():
  from hcq.mockgpu import MockOS
  from hcq.mockgpu.qcom import add_qcom_gpu
  with MockOS() as osi:
    add_qcom_gpu(osi)
    f = osi.open("/dev/kgsl-3d0")
    yield f
    f.close()


def errno_of(fn):
  with pytest.raises(OSCallError) as e: fn()
  return e.value.errno


def test_kgsl_refuses_bad_ids_and_sizes(kgsl):
  assert errno_of(lambda: K.IOCTL_KGSL_GPUMEM_ALLOC_ID(kgsl, size=0)) == errno.EINVAL
  assert errno_of(lambda: K.IOCTL_KGSL_GPUMEM_ALLOC_ID(kgsl, size=1 << 40)) == errno.EINVAL
  assert errno_of(lambda: K.IOCTL_KGSL_GPUMEM_FREE_ID(kgsl, id=99)) == errno.EINVAL        # kgsl.c: -EINVAL
  assert errno_of(lambda: K.IOCTL_KGSL_DRAWCTXT_DESTROY(kgsl, drawctxt_id=7)) == errno.EINVAL
  info = K.struct_kgsl_devinfo()
  import ctypes
  assert errno_of(lambda: K.IOCTL_KGSL_DEVICE_GETPROPERTY(kgsl, type=K.KGSL_PROP_DEVICE_INFO, value=ctypes.addressof(info),
                                                          sizebytes=4)) == errno.EINVAL
  K.IOCTL_KGSL_DEVICE_GETPROPERTY(kgsl, type=K.KGSL_PROP_DEVICE_INFO, value=ctypes.addressof(info),
                                  sizebytes=ctypes.sizeof(info))
  assert info.chip_id == 0x06030001
  ctx = K.IOCTL_KGSL_DRAWCTXT_CREATE(kgsl, flags=0).drawctxt_id
  cmd = K.struct_kgsl_command_object(gpuaddr=0x1000, size=16, flags=K.KGSL_CMDLIST_IB)   # in no memory object
  assert errno_of(lambda: K.IOCTL_KGSL_GPU_COMMAND(kgsl, context_id=ctx, cmdlist=ctypes.addressof(cmd),
                                                   cmdsize=ctypes.sizeof(cmd), numcmds=1)) == errno.EINVAL
  assert errno_of(lambda: K.IOCTL_KGSL_GPU_COMMAND(kgsl, context_id=ctx + 1, cmdlist=ctypes.addressof(cmd),
                                                   cmdsize=ctypes.sizeof(cmd), numcmds=1)) == errno.EINVAL
  # a timestamp not issued yet is waited for, then ETIMEDOUT (adreno_drawctxt_wait), not refused
  with pytest.raises(OSCallError, match="not issued yet") as e:
    K.IOCTL_KGSL_DEVICE_WAITTIMESTAMP_CTXTID(kgsl, context_id=ctx, timestamp=5, timeout=20)
  assert e.value.errno == errno.ETIMEDOUT
  obj = K.IOCTL_KGSL_GPUMEM_ALLOC_ID(kgsl, size=100)
  assert obj.size == 0x1000 and obj.mmapsize == 0x1000
  assert errno_of(lambda: kgsl.mmap(0x1000, (obj.id + 1) << 12)) == errno.EINVAL


# ---- faults and hangs through the driver
def fresh(timeout_s=10.0):
  return hcq.open("MOCK+QCOM", config=Config(timeout_s=timeout_s))


def test_a_fault_names_the_context_and_timestamp_and_latches():
  with fresh() as dev:
    text = b"@localsize 1, 1, 1\nmov.u32u32 r0.x, 0\nmov.u32u32 r0.y, 0\nmov.u32u32 r1.x, 7\n(rpt5)nop\n" \
           b"stg.u32 g[r0.x], r1.x, 1\nend\nnop\n"
    prog = dev.load(text, "null_store")
    # the cause first, the ioctl's errno last and by name (issue 29, item 15: never "[Errno 35] Resource deadlock ...")
    with pytest.raises(GPUFault, match=r"context 1 faulted at timestamp \d+: GPU page fault at address 0x0: .*outside "
                                       r"every memory object .*IOCTL_KGSL_DEVICE_WAITTIMESTAMP_CTXTID.* returned EDEADLK") as e:
      prog(global_size=(1,), local_size=(1,), wait=True)
    assert "[Errno" not in str(e.value) and "Resource deadlock" not in str(e.value)
    with pytest.raises(DeviceError, match="faulted earlier"): prog(global_size=(1,), local_size=(1,), wait=True)


def test_a_submission_after_an_unseen_fault_is_refused_by_kgsl_and_latched():
  with fresh() as dev:
    words = cp.wait_for_idle()
    words[0] ^= 1 << 23                               # an illegal packet: the context faults (nobody waits yet)
    first = dev.submit_cp(words)
    with pytest.raises(GPUFault, match=r"context 1 faulted at timestamp 1: .*bad parity.*IOCTL_KGSL_GPU_COMMAND "
                                       r"returned EDEADLK"):
      dev.submit_cp(cp.wait_for_idle())
    assert dev.timeline.value == first               # the refused submission gave its value back
    with pytest.raises(DeviceError, match="faulted earlier"): dev.submit_cp(cp.wait_for_idle())


def test_an_illegal_packet_faults_the_context():
  with fresh() as dev:
    words = cp.wait_for_idle()
    words[0] ^= 1 << 23                               # the opcode's parity
    value = dev.submit_cp(words)
    with pytest.raises(GPUFault, match="bad parity"): dev.wait_value(value)


def test_a_submission_that_never_signals_times_out_naming_the_timestamp():
  with fresh(timeout_s=0.3) as dev:
    flag = dev.alloc(64)                              # never written: the CP waits for it forever
    value = dev.submit_cp(cp.wait_reg_mem_ge(flag.va, 1))
    with pytest.raises(Timeout, match=r"KGSL context 1 has not retired timestamp \d+ \(IOCTL_KGSL_DEVICE_WAITTIMESTAMP"):
      ends(dev.wait_value, value)                     # the device's timeout ends it (a hang would fail the guard)
  # close() did not wait for the stuck work again (the with block ended)


def test_a_wait_in_the_stream_resumes_when_the_host_writes():
  with fresh() as dev:
    flag = dev.alloc(64)
    out = dev.alloc(64)
    value = dev.submit_cp(cp.wait_reg_mem_ge(flag.va, 3) + cp.mem_write(out.va, 0xABCD))
    flag.cpu_view[:4] = struct.pack("<I", 3)
    dev.wait_value(value)
    assert struct.unpack("<I", dev.copyout(out, 4))[0] == 0xABCD


def test_timed_launches_read_the_always_on_counter():
  with fresh() as dev:
    prog = dev.load_code(Kernel(), struct.pack("<2Q", END, 0), "empty")
    t = prog(global_size=(2,), local_size=(1,), wait=True)
    assert 0 < t < 5


def test_program_headers_and_arguments_are_checked():
  with fresh() as dev:
    with pytest.raises(DeviceError, match="p:2: unknown header @frob"): dev.load(b"@localsize 1,1,1\n@frob 3\nend\n", "p")
    with pytest.raises(DeviceError, match="@wgid must name a high register"): dev.load(b"@wgid(r1.x)\nend\n", "p")
    prog = dev.load(b"@localsize 4, 1, 1\n@buf 16\nend\nnop\n", "p")
    small = dev.alloc(32)
    with pytest.raises(DeviceError, match="argument 0 is 32 bytes, its @buf needs 64"):
      prog(small, global_size=(1,), local_size=(4, 1, 1))
    with pytest.raises(DeviceError, match="takes 1 buffer"): prog(global_size=(1,), local_size=(4, 1, 1))
    with pytest.raises(DeviceError, match="work-group size of \\(4, 1, 1\\)"):
      prog(dev.alloc(64), global_size=(1,), local_size=(2, 1, 1))


def test_an_instruction_the_model_does_not_know_faults_naming_it():
  with fresh() as dev:
    # "sam (f32)(xyzw)r0.x, r0.z, s#0, t#0"-like texture sampling is not modelled: its words fault at dispatch
    text = b"@localsize 1, 1, 1\nisam (f32)(xyzw)r0.x, r0.x, s#0, t#0\nend\n"
    try: prog = dev.load(text, "tex")
    except DeviceError: pytest.skip("the assembler does not take this spelling")
    with pytest.raises(GPUFault, match=r"instruction 0 \(isam.*is not modelled"):
      prog(global_size=(1,), local_size=(1,), wait=True)


def test_dispatch_registers_follow_the_program():
  with fresh() as dev:
    prog = dev.load(b"@localsize 8, 2, 1\n@buf 4\n@const(c9.x) 1.0\n@wgid(r48.x)\n@invocationid(r0.x)\n"
                    b"mov.u32u32 r13.y, c2.x\nend\nnop\n", "p")
    words = list(prog.dispatch_words((3, 1, 1), (8, 2, 1)))
    regs = {}
    for _, name, fields in cp.decode([w if isinstance(w, int) else 0 for w in words]):
      if name == "PKT4": regs.update(f.split("=") for f in fields)
    ctrl = int(regs["SP_CS_CTRL_REG0"], 16)
    assert (ctrl & a6xx.A6XX_SP_CS_CTRL_REG0_FULLREGFOOTPRINT__MASK) >> 7 == 14          # r13 is the highest
    assert ctrl & a6xx.A6XX_SP_CS_CTRL_REG0_MERGEDREGS
    assert int(regs["HLSQ_CS_CNTL"], 16) & 0xFF == 12 // 4 and prog.constlen == 12      # c9 -> 3 x 4 vec4s
    cntl0 = int(regs["HLSQ_CS_CNTL_0"], 16)
    assert cntl0 & 0xFF == 48 * 4 and cntl0 >> 24 == 0                                    # wgid r48.x, local id r0.x
    nd = int(regs["HLSQ_CS_NDRANGE_0"], 16)
    assert (nd >> 2 & 0x3FF, nd >> 12 & 0x3FF, nd >> 22) == (7, 1, 0)                   # local size - 1
    assert int(regs["HLSQ_CS_NDRANGE_1"], 16) == 24 and int(regs["SP_CS_CONFIG"], 16) >> 22 == 1   # 1 IBO


def test_the_cp_runs_indirect_buffers_register_reads_and_direct_state():
  with fresh() as dev:
    out = dev.alloc(64)
    ib = dev.alloc(64)
    inner = cp.mem_write(out.va + 8, 0x5555, 0x6666)
    ib.cpu_view[:len(inner) * 4] = struct.pack(f"<{len(inner)}I", *inner)
    reg = a6xx.REG_A6XX_SP_CS_INSTRLEN
    words = cp.indirect_buffer(ib.va, len(inner)) + cp.pkt4(reg, 0x1234) + cp.reg_to_mem(reg, out.va, 1, is64=False)
    dev.wait_value(dev.submit_cp(words))
    assert struct.unpack("<4I", dev.copyout(out, 16)) == (0x1234, 0, 0x5555, 0x6666)
    kgsl = dev.owned_os.devices[0]
    dev.wait_value(dev.submit_cp(cp.load_state6(adreno_pm4.ST6_CONSTANTS, adreno_pm4.SB6_CS_SHADER, 1,
                                                payload=(1, 2, 3, 4), dst_off=5)))
    assert kgsl.cp.consts[20:24].tolist() == [1, 2, 3, 4]            # vec4 5 = dwords 20..23
    before = time.monotonic()
    dev.wait_value(dev.submit_cp(cp.reg_to_mem(packets.ALWAYS_ON_COUNTER, out.va)))
    ticks = struct.unpack("<Q", dev.copyout(out, 8))[0]
    assert abs(ticks / 19.2e6 - before) < 5                         # the always-on counter: 19.2 MHz


def test_free_unmaps_kgsls_mmapsize_not_the_size():
  """KGSL's mmapsize is the object's footprint (kgsl_memdesc_footprint: with a guard page, a page more than the
  size): free() must unmap what mmap mapped, or the guard page's mapping leaks."""
  from hcq.mockgpu.qcom.kgsl import KGSLModel
  with fresh() as dev:
    model: KGSLModel = dev.owned_os.devices[0]
    model.guard_page = True
    buf = dev.alloc(0x1000)
    va = buf.va
    assert dev.owned_os.memory.find(va + 0x1000) is not None        # the guard page is mapped too
    dev.free(buf)
    assert dev.owned_os.memory.find(va) is None and dev.owned_os.memory.find(va + 0x1000) is None


def test_a_barrier_writes_dirty_lines_back_before_it_invalidates():
  """tinygrad's memory_barrier(): CACHE_FLUSH_TS (write back), CP_WAIT_MEM_WRITES, then CACHE_INVALIDATE (later
  reads come from memory); an invalidate alone would drop the writes of the kernel before it."""
  with fresh() as dev:
    prog = dev.load_code(Kernel(), struct.pack("<2Q", END, 0), "e")
    shape = prog.shape((1,), (1,), False)
    words = [w if isinstance(w, int) else 0 for w in shape.cmd.template]
    got = cp.decode(words)
    names = [(n, int(f[0], 16) & 0xFF if n == "CP_EVENT_WRITE" else None) for _, n, f in got]
    flush = names.index(("CP_EVENT_WRITE", adreno_pm4.CACHE_FLUSH_TS))
    assert names[flush + 1][0] == "CP_WAIT_MEM_WRITES"
    assert names[flush + 2] == ("CP_EVENT_WRITE", adreno_pm4.CACHE_INVALIDATE)
    assert flush < names.index(("CP_EXEC_CS", None))
