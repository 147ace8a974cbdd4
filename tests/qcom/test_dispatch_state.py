"""The compute state a dispatch really uses, programmed by the driver and enforced by the mock (issue 28, items 1, 6
and 7), and mutation tests: each defect of the issue reintroduced -- in the driver's packets or in a program -- is
caught by the mock (a fault naming the register or instruction, or a wrong result).

Also issue 29: a program over 16,368 instructions loads (CP_LOAD_STATE6's 10-bit NUM_UNIT preloads at most the
instruction cache's 64 groups, as computerator does) and the hang timer does not count the decoding of a program."""
from __future__ import annotations

import struct

import numpy as np
import pytest

import hcq
from hcq.autogen.qcom import a6xx, adreno_pm4
from hcq.config import Config
from hcq.drivers.qcom import cp, program
from hcq.drivers.qcom.program import Kernel, QCOMProgram
from hcq.errors import DeviceError, GPUFault

from .test_programs import PROGRAMS, run

END, NOP = 0x0300000000000000, 0


@pytest.fixture
def dev():
  with hcq.open("MOCK+QCOM", config=Config(timeout_s=10.0)) as d: yield d


def registers(words) -> dict:
  """{register: value} of the type-4 packets in a word list (address patches as they are)."""
  out, i = {}, 0
  while i < len(words):
    kind, what, n = cp.header_fields(words[i])
    if kind == "type4":
      for k in range(n): out[what + k] = words[i + 1 + k]
    i += 1 + n
  return out


def packets7(words) -> list:
  """(opcode, body) of the type-7 packets in a word list."""
  out, i = [], 0
  while i < len(words):
    kind, what, n = cp.header_fields(words[i])
    if kind == "type7": out.append((what, list(words[i + 1:i + 1 + n])))
    i += 1 + n
  return out


def rewrite(words, reg, value=None, drop=False) -> list:
  """words with register reg's type-4 write set to value (a function of the old one), or dropped."""
  out, i = [], 0
  while i < len(words):
    kind, what, n = cp.header_fields(words[i])
    body = list(words[i + 1:i + 1 + n])
    if kind == "type4" and what <= reg < what + n:
      k = reg - what
      if drop:
        if k: out += cp.pkt4(what, *body[:k])
        if k + 1 < n: out += cp.pkt4(reg + 1, *body[k + 1:])
      else:
        body[k] = value(body[k])
        out += cp.pkt4(what, *body)
    else: out += words[i:i + 1 + n]
    i += 1 + n
  return out


def mutate(monkeypatch, fn):
  """Every launch's dispatch words go through fn (a driver defect reintroduced)."""
  orig = QCOMProgram.dispatch_words
  monkeypatch.setattr(QCOMProgram, "dispatch_words", lambda self, grid, block: fn(orig(self, grid, block)))


VADD = (PROGRAMS / "vadd.asm").read_bytes()


def vadd(dev):
  a = np.arange(64, dtype=np.float32)
  return run(dev, VADD, [a, a * 2, None])[2].view(np.float32), a * 3


# ---- what the driver programs (computerator's list; the README's table)
def test_the_driver_programs_the_compute_state_computerator_does(dev):
  prog = dev.load(VADD, "vadd")
  regs = registers(prog.dispatch_words((1, 1, 1), (64, 1, 1)))
  r = lambda name: regs[getattr(a6xx, "REG_A6XX_" + name)]
  assert r("SP_MODE_CONTROL") == a6xx.A6XX_SP_MODE_CONTROL_CONSTANT_DEMOTION_ENABLE | 4        # computerator: | 4
  assert r("SP_FLOAT_CNTL") == 0
  inv = r("HLSQ_INVALIDATE_CMD")
  assert inv & a6xx.A6XX_HLSQ_INVALIDATE_CMD_CS_STATE and inv & a6xx.A6XX_HLSQ_INVALIDATE_CMD_CS_IBO
  assert r("HLSQ_CS_CNTL_1") == a6xx.A6XX_HLSQ_CS_CNTL_1_LINEARLOCALIDREGID(0xFC)            # none, THREAD64
  assert r("SP_CS_CTRL_REG1") == 0x41                                                         # SHARED_SIZE(1) | CONSTANTRAMMODE(CONSTLEN_256)
  assert r("SP_CS_INSTRLEN") == prog.units and r("SP_CS_CONFIG") & a6xx.A6XX_SP_CS_CONFIG_ENABLED
  assert a6xx.REG_A6XX_SP_CS_CNTL_0 not in regs and a6xx.REG_A6XX_HLSQ_CS_CTRL_REG1 not in regs   # no LPAC
  assert a6xx.REG_A6XX_SP_CS_PVT_MEM_PARAM not in regs                                      # no @pvtmem


def test_pvtmem_programs_private_memory_as_computerator_does(dev):
  text = (b"@localsize 1, 1, 1\n@buf 4\n@pvtmem 4\nmov.u32u32 r0.x, 0\nmov.u32u32 r1.x, 5\n(rpt5)nop\n"
          b"stp.u32 p[r0.x], r1.x, 1\nldp.u32 r2.x, p[r0.x], 1\n(sy)nop\nstib.b.untyped.1d.u32.1.imm r2.x, r0.x, 0\n"
          b"end\nnop\n")
  prog = dev.load(text, "pvt")
  regs = registers(prog.dispatch_words((1, 1, 1), (1, 1, 1)))
  assert regs[a6xx.REG_A6XX_SP_CS_PVT_MEM_PARAM] == a6xx.A6XX_SP_CS_PVT_MEM_PARAM_MEMSIZEPERITEM(512)
  per_sp = 512 * 128 * 16                                     # ALIGN(512 * fibers_per_sp, 4 KiB)
  assert regs[a6xx.REG_A6XX_SP_CS_PVT_MEM_SIZE] == a6xx.A6XX_SP_CS_PVT_MEM_SIZE_TOTALPVTMEMSIZE(per_sp)
  assert regs[a6xx.REG_A6XX_SP_CS_PVT_MEM_HW_STACK_OFFSET] == a6xx.A6XX_SP_CS_PVT_MEM_HW_STACK_OFFSET_OFFSET(per_sp)
  assert run(dev, text, [None])[0][0] == 5


def test_the_work_group_limit_shrinks_with_the_register_footprint(dev):
  assert program.max_threads(1) == 1024 and program.max_threads(48) == 256      # tinygrad's max_threads
  big = b"@localsize 512, 1, 1\nmov.u32u32 r47.x, 0\nend\nnop\n"
  with pytest.raises(DeviceError, match=r"512 threads; a footprint of 48 full registers allows at most 256"):
    dev.load(big, "big")
  assert dev.load(big.replace(b"512", b"256"), "ok").max_group == 256


# ---- mutations of the driver: the mock catches each
def test_mutation_fence_with_the_timestamp_bit_writes_a_clock_not_the_value(monkeypatch):
  orig = cp.event_write
  def with_bit(event, addr=None, value=None):
    words = orig(event, addr, value)
    if addr is not None: words[1] |= adreno_pm4.CP_EVENT_WRITE_0_TIMESTAMP
    return words
  with hcq.open("MOCK+QCOM") as good:
    prog = good.load_code(Kernel(), struct.pack("<2Q", END, NOP), "e")
    prog(global_size=(1,), local_size=(1,), wait=True)
    assert good.timeline.signal.value == good.timeline.value
  monkeypatch.setattr(cp, "event_write", with_bit)
  with hcq.open("MOCK+QCOM", config=Config(timeout_s=2.0)) as bad:
    prog = bad.load_code(Kernel(), struct.pack("<2Q", END, NOP), "e")
    try: prog(global_size=(1,), local_size=(1,), wait=True)
    except hcq.HCQError: pass
    assert bad.timeline.signal.value != bad.timeline.value       # the signal received the GPU's clock


@pytest.mark.parametrize("reg", ["HLSQ_CS_CNTL_1", "SP_CS_CTRL_REG1", "HLSQ_CS_CNTL", "SP_CS_CONFIG"])
def test_mutation_a_register_never_written_is_refused(dev, monkeypatch, reg):
  mutate(monkeypatch, lambda w: rewrite(w, getattr(a6xx, "REG_A6XX_" + reg), drop=True))
  with pytest.raises(GPUFault, match=rf"CP_EXEC_CS: {reg} \({getattr(a6xx, 'REG_A6XX_' + reg):#x}\) was never written"):
    vadd(dev)


def test_mutation_sp_cs_cntl_0_on_a630_is_refused(dev, monkeypatch):
  mutate(monkeypatch, lambda w: cp.pkt4(a6xx.REG_A6XX_SP_CS_CNTL_0, 0xFCFCFCFC) + w)
  with pytest.raises(GPUFault, match=r"SP_CS_CNTL_0 \(0xa9c2\) does not exist on this GPU"): vadd(dev)


def test_mutation_threadsizes_that_disagree_are_refused(dev, monkeypatch):
  mutate(monkeypatch, lambda w: rewrite(w, a6xx.REG_A6XX_HLSQ_CS_CNTL_1, lambda v: v | a6xx.A6XX_HLSQ_CS_CNTL_1_THREADSIZE(1)))
  with pytest.raises(GPUFault, match=r"HLSQ_CS_CNTL_1.THREADSIZE \(1\) differs from SP_CS_CTRL_REG0.THREADSIZE \(0\)"):
    vadd(dev)


def test_mutation_a_linear_local_id_register_of_r0_clobbers_the_program(dev, monkeypatch):
  """HLSQ_CS_CNTL_1's reset value is undocumented; a LINEARLOCALIDREGID of 0 (r0.x) makes the hardware write the
  linear id over the invocation id the program keeps there -- the mock does the same."""
  mutate(monkeypatch, lambda w: rewrite(w, a6xx.REG_A6XX_HLSQ_CS_CNTL_1, lambda v: 0))
  text = b"""@localsize 4, 2, 1
@buf 8
@invocationid(r0.x)
shl.b r1.x, r0.y, 2
(rpt2)nop
add.u r1.x, r1.x, r0.x
(rpt5)nop
stib.b.untyped.1d.u32.1.imm r0.y, r1.x, 0
end
nop
"""
  got = run(dev, text, [None])[0]
  assert not np.array_equal(got, [0, 0, 0, 0, 1, 1, 1, 1])     # r0.x held the linear id (0..7), not x (0..3)


def test_mutation_constlen_too_small_faults_the_constant_read(dev, monkeypatch):
  mutate(monkeypatch, lambda w: rewrite(w, a6xx.REG_A6XX_HLSQ_CS_CNTL, lambda v: a6xx.A6XX_HLSQ_CS_CNTL_CONSTLEN(4) |
                                        a6xx.A6XX_HLSQ_CS_CNTL_ENABLED))
  text = b"@localsize 1, 1, 1\n@const(c8.x) 1, 2, 3, 4\nmov.u32u32 r0.x, c8.x\nend\nnop\n"
  with pytest.raises(GPUFault, match=r"reads c8.x, past HLSQ_CS_CNTL.CONSTLEN \(4 vec4s\)"): run(dev, text, [])


def test_mutation_a_footprint_short_of_the_registers_faults(dev, monkeypatch):
  mutate(monkeypatch, lambda w: rewrite(w, a6xx.REG_A6XX_SP_CS_CTRL_REG0, lambda v: (v & ~a6xx.A6XX_SP_CS_CTRL_REG0_FULLREGFOOTPRINT__MASK) |
                                        a6xx.A6XX_SP_CS_CTRL_REG0_FULLREGFOOTPRINT(1)))
  with pytest.raises(GPUFault, match=r"outside SP_CS_CTRL_REG0.FULLREGFOOTPRINT \(1 registers\)"): vadd(dev)


def test_mutation_a_work_group_larger_than_the_footprint_allows_is_refused(dev, monkeypatch):
  monkeypatch.setattr(program, "max_threads", lambda regs: 1024)      # hcq's old limit: 1024 whatever the footprint
  prog = dev.load(b"@localsize 512, 1, 1\nmov.u32u32 r47.x, 0\nend\nnop\n", "big")
  with pytest.raises(GPUFault, match=r"a work-group of 512 fibers .*\.FULLREGFOOTPRINT 48 allows 256"):
    prog(global_size=(1,), local_size=(512, 1, 1), wait=True)


def test_mutation_nibo_short_of_the_buffers_faults(dev, monkeypatch):
  mutate(monkeypatch, lambda w: rewrite(rewrite(w, a6xx.REG_A6XX_SP_CS_CONFIG, lambda v: (v & ~a6xx.A6XX_SP_CS_CONFIG_NIBO__MASK) |
                                                a6xx.A6XX_SP_CS_CONFIG_NIBO(2)), a6xx.REG_A6XX_SP_CS_IBO_COUNT, lambda v: 2))
  with pytest.raises(GPUFault, match=r"IBO slot 2 is past SP_CS_CONFIG.NIBO \(2\)"): vadd(dev)


def test_mutation_instrlen_short_of_the_code_faults(dev, monkeypatch):
  mutate(monkeypatch, lambda w: rewrite(w, a6xx.REG_A6XX_SP_CS_INSTRLEN, lambda v: 1))
  text = b"@localsize 1, 1, 1\n" + b"nop\n" * 20 + b"end\nnop\n"
  with pytest.raises(GPUFault, match=r"(left the program|preloaded \d+ units of shader, SP_CS_INSTRLEN is 1)"):
    run(dev, text, [])


def test_mutation_private_memory_not_programmed_faults(dev, monkeypatch):
  mutate(monkeypatch, lambda w: rewrite(w, a6xx.REG_A6XX_SP_CS_PVT_MEM_PARAM, lambda v: 0))
  text = b"@localsize 1, 1, 1\n@pvtmem 4\nmov.u32u32 r0.x, 0\n(rpt5)nop\nstp.u32 p[r0.x], r0.x, 1\nend\nnop\n"
  with pytest.raises(GPUFault, match=r"no private memory was programmed"): run(dev, text, [])


def test_mutation_a_shared_size_short_of_localmem_loses_the_data(dev, monkeypatch):
  text = b"""@localsize 1, 1, 1
@buf 4
@localmem 4096
mov.u32u32 r0.x, 0
mov.u32u32 r0.y, 7
mov.u32u32 r0.z, 3000
mov.u32u32 r0.w, 99
(rpt5)nop
stl.u32 l[r0.z], r0.w, 1
stl.u32 l[r0.x], r0.y, 1
ldl.u32 r1.x, l[r0.z], 1
(ss)nop
stib.b.untyped.1d.u32.1.imm r1.x, r0.x, 0
end
"""
  assert run(dev, text, [None])[0][0] == 99
  mutate(monkeypatch, lambda w: rewrite(w, a6xx.REG_A6XX_SP_CS_CTRL_REG1, lambda v: 0x41))   # always 2 KiB
  assert run(dev, text, [None])[0][0] == 7               # offset 3000 was rewritten to 0 (a6xx.xml)


# ---- mutations of the programs: each old defect, caught
def test_mutation_atomics_asm_with_the_data_in_x_adds_nothing(dev):
  good = (PROGRAMS / "atomics.asm").read_bytes()
  old = good.replace(b"mov.u32u32 r1.x, 0\nmov.u32u32 r1.y, 1", b"mov.u32u32 r1.x, 1\nmov.u32u32 r1.y, 0")
  assert old != good
  assert run(dev, old, [None, None], groups=2)[0][0] == 0      # hardware adds .y: 0, not the 128 the test wants


def test_mutation_int_alu_with_mull_u_as_a_32_bit_multiply_is_wrong(dev):
  text = b"""@localsize 1, 1, 1
@buf 2
@buf 1
mov.u32u32 r0.x, 0
mov.u32u32 r0.y, 1
(rpt5)nop
ldib.b.untyped.1d.u32.1.imm r1.x, r0.x, 0
ldib.b.untyped.1d.u32.1.imm r1.y, r0.y, 0
(sy)mull.u r2.x, r1.x, r1.y
(rpt5)nop
stib.b.untyped.1d.u32.1.imm r2.x, r0.x, 1
end
nop
"""
  a, b = 0x12345, 0x6789A
  assert run(dev, text, [np.array([a, b], np.uint32), None])[1][0] != (a * b) & 0xFFFFFFFF


@pytest.mark.parametrize("name, good, bad", [
  ("reduce", b"(ss)add.u r1.x, r1.x, r1.y", b"(sy)add.u r1.x, r1.x, r1.y"),      # an ldl result waited with (sy)
  ("reduce", b"(ss)nop\nstib", b"(sy)nop\nstib"),
  ("atomics", b"(ss)nop\nstib", b"nop\nstib"),                                    # no (ss) after ldl
  ("atomics", b"(sy)(jp)nop", b"(jp)nop"),                                        # no (sy) after atomic.b
  ("float_alu", b"(ss)(rpt5)nop", b"(rpt5)nop"),                                  # SFU results without (ss)
  ("vadd", b"(sy)add.f", b"add.f"),                                               # ldib results without (sy)
  ("int_alu", b"(rpt5)nop\nstib", b"stib"),                                       # delay slots before a store
])
def test_mutation_a_program_without_its_sync_flags_faults(name, good, bad):
  text = (PROGRAMS / f"{name}.asm").read_bytes()
  assert good in text
  with hcq.open("MOCK+QCOM") as d:
    prog = d.load(text.replace(good, bad, 1), name)
    bufs = [d.alloc(n * 4) for n, _ in prog.kernel.bufs]
    with pytest.raises(GPUFault, match=r"GPU sync hazard"):
      prog(*bufs, global_size=(2,), local_size=prog.kernel.local_size, wait=True)


# ---- issue 29: program size and the hang timer
def test_a_program_over_the_num_unit_limit_loads_and_runs(dev):
  n = 17000                                             # > 1023 groups of 16: NUM_UNIT's 10 bits
  prog = dev.load_code(Kernel(), struct.pack(f"<{n}Q", *([NOP] * (n - 2) + [END, NOP])), "big")
  words = prog.dispatch_words((1, 1, 1), (1, 1, 1))
  assert registers(words)[a6xx.REG_A6XX_SP_CS_INSTRLEN] == (n * 8 + 127) // 128
  shader = [b[0] for op, b in packets7(words) if op == cp.op("CP_LOAD_STATE6_FRAG") and
            (b[0] & adreno_pm4.CP_LOAD_STATE6_0_STATE_TYPE__MASK) >> adreno_pm4.CP_LOAD_STATE6_0_STATE_TYPE__SHIFT
            == adreno_pm4.ST6_SHADER]
  assert [w >> adreno_pm4.CP_LOAD_STATE6_0_NUM_UNIT__SHIFT for w in shader] == [64]   # the preload: instr_cache_size
  prog(global_size=(1,), local_size=(1,), wait=True)


def test_load_state6_refuses_a_num_unit_that_does_not_fit():
  with pytest.raises(ValueError, match=r"1024 units do not fit NUM_UNIT \(at most 1023\)"):
    cp.load_state6(adreno_pm4.ST6_SHADER, adreno_pm4.SB6_CS_SHADER, 1024, 0x1000)


def test_the_hang_timer_does_not_count_decoding(dev, monkeypatch):
  import time

  from hcq.mockgpu.qcom import ir3
  mock = dev.owned_os.devices[0]
  mock.hang_timeout_s = 0.2
  orig = ir3.Dispatch._program
  def slow(self, gpu_id, words):
    time.sleep(0.4)                                     # decoding a big program on a loaded machine
    return orig(self, gpu_id, words)
  monkeypatch.setattr(ir3.Dispatch, "_program", slow)
  prog = dev.load_code(Kernel(), struct.pack("<2Q", END, NOP), "e")
  prog(global_size=(1,), local_size=(1,), wait=True)    # not a GPU hang: the program ran for microseconds


def test_headers_past_their_register_fields_are_refused(dev):
  with pytest.raises(DeviceError, match=r"more than 127 @buf \(SP_CS_CONFIG.NIBO"):
    dev.load(b"@localsize 1, 1, 1\n" + b"@buf 4\n" * 128 + b"end\nnop\n", "many")
  with pytest.raises(DeviceError, match=r"@buf 1073741824 does not fit an IBO descriptor"):
    dev.load(b"@localsize 1, 1, 1\n@buf 1073741824\nend\nnop\n", "huge")
  with pytest.raises(DeviceError, match=r"@pvtmem 200000 does not fit SP_CS_PVT_MEM_PARAM.MEMSIZEPERITEM"):
    dev.load(b"@localsize 1, 1, 1\n@pvtmem 200000\nend\nnop\n", "pvt")
  with pytest.raises(DeviceError, match=r"@localmem 40000 is not 1..32768 bytes"):
    dev.load(b"@localsize 1, 1, 1\n@localmem 40000\nend\nnop\n", "lm")


def test_mutation_without_hlsq_invalidate_cmd_the_next_dispatch_is_refused(dev, monkeypatch):
  got, want = vadd(dev)                                 # the first dispatch loads state nothing used yet
  np.testing.assert_array_equal(got[:64], want)
  mutate(monkeypatch, lambda w: rewrite(w, a6xx.REG_A6XX_HLSQ_INVALIDATE_CMD, drop=True))
  with pytest.raises(GPUFault, match=r"CP_LOAD_STATE6 replaced the compute state .* without HLSQ_INVALIDATE_CMD"):
    vadd(dev)


def test_half_constants_are_demoted_as_sp_mode_control_says(dev, monkeypatch):
  """SP_MODE_CONTROL.CONSTANT_DEMOTION_ENABLE (computerator sets it): hc1.y loads c1.y converted to f16 (a6xx.xml);
  without it, hc1.y (half component 5) is the top 16 bits of c0.z (the packed constant file)."""
  text = b"""@localsize 1, 1, 1
@buf 1
@const(c0.x) 0, 0, 0x40000000, 0
@const(c1.x) 0, 3.0, 0, 0
mov.u32u32 r0.x, 0
add.f hr2.x, hc1.y, hc1.y
(rpt5)nop
cov.f16f32 r1.x, hr2.x
(rpt5)nop
stib.b.untyped.1d.u32.1.imm r1.x, r0.x, 0
end
nop
"""
  assert run(dev, text, [None])[0].view(np.float32)[0] == 6.0           # 3.0 + 3.0
  mutate(monkeypatch, lambda w: rewrite(w, a6xx.REG_A6XX_SP_MODE_CONTROL, lambda v: 4))    # demotion off
  with hcq.open("MOCK+QCOM") as other:
    assert run(other, text, [None])[0].view(np.float32)[0] == 4.0      # hc1.y = 0x4000 (f16 2.0): 2 + 2


def test_mutation_atomic_g_cmpxchg_with_value_then_compare_does_not_swap(dev):
  """Mesa collects (compare, value) for atomic.g.cmpxchg (ir3_a6xx.c); the old mock read (value, compare)."""
  text = b"""@localsize 1, 1, 1
@buf 4 (c0.x)
mov.u32u32 r1.x, c0.x
mov.u32u32 r1.y, c0.y
mov.u32u32 r2.x, %d
mov.u32u32 r2.y, %d
(rpt5)nop
atomic.g.cmpxchg.untyped.1d.u32.1.g r4.x, r1.x, r2.x
end
nop
"""
  assert run(dev, text % (5, 42), [np.array([5, 0, 0, 0], np.uint32)])[0][0] == 42      # (compare, value)
  assert run(dev, text % (42, 5), [np.array([5, 0, 0, 0], np.uint32)])[0][0] == 5       # swapped: no match
