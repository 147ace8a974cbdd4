"""MOCK+NV against a careless or hostile user (issue 29 items 3, 4, 11): Ctrl-C on an endless kernel ends at once and
leaves the device closable without waiting for it; PTX statements are read in linear time and absurd ones refused
with their size; bad PTX names its line and instruction, and an address where there is one."""
import _thread
import threading

import numpy as np
import pytest

import hcq
from hcq.config import Config
from hcq.drivers.nv import open_device
from hcq.mockgpu import mock_nv_os
from hcq.mockgpu.nv import gpu as mock_gpu
from hcq.mockgpu.nv.ptx import PTXError, parse

HEAD = ".version 7.0\n.target sm_80\n.address_size 64\n"
SPIN = HEAD + """.visible .entry spin(.param .u64 out) {
  .reg .b32 %r<3>;
$l:
  add.u32 %r1, %r1, 1;
  bra $l;
}
"""


def _open(gpu="H200", **kw):
  os = mock_nv_os(Config(**kw), gpu=gpu)
  dev = open_device("RM", 0, os, os.config, label="MOCK+NV:0")
  dev.owned_os = os
  return dev


def test_ctrl_c_in_an_endless_kernel_ends_at_once_and_close_does_not_wait_for_it(monkeypatch):
  runs = []
  orig = mock_gpu.MockNVGPU._run_kernel
  def counted(self, *a, **kw):
    runs.append(a[1].name)
    # what Ctrl-C does, once the kernel runs: KeyboardInterrupt in the main thread (which runs the mock's kernel)
    threading.Timer(0.2, _thread.interrupt_main).start()
    return orig(self, *a, **kw)
  monkeypatch.setattr(mock_gpu.MockNVGPU, "_run_kernel", counted)
  dev = _open(timeout_s=5)            # without the fix, close would run the endless kernel again for 5 s
  prog = dev.load(SPIN.encode())
  out = dev.alloc(64)
  with pytest.raises(KeyboardInterrupt): prog(out, global_size=1, local_size=32, wait=True)
  assert runs == ["spin"]
  dev.close()                         # does not wait for the interrupted work: the kernel is not run again
  assert runs == ["spin"] and dev.closed


def test_a_long_initializer_statement_is_read_in_linear_time():
  # a 150,000-element initializer (about 1 MB in one statement): a parser quadratic in statement length takes hours
  n = 150_000
  text = HEAD + f".global .align 4 .u32 tab[{n}] = {{{', '.join(str(i) for i in range(n))}}};\n" + \
    ".visible .entry k(.param .u64 out) { ret; }\n"
  assert len(text) > 1_000_000
  mod = parse(text)
  assert np.frombuffer(mod.globals["tab"].init, np.uint32)[-1] == n - 1


def test_an_absurdly_long_instruction_is_refused_naming_its_line_and_length():
  stmt = "add.u32 %r1, %r2, " + "1+" * 50_000 + "1;"
  with pytest.raises(PTXError) as e:
    parse(HEAD + ".visible .entry k() {\n.reg .b32 %r<3>;\n" + stmt + "\nret;\n}\n")
  assert "line 6: an instruction of 100019 characters: the mock reads at most 16384" in str(e.value)
  assert len(str(e.value)) < 600       # the statement is quoted, not copied


def test_absurd_declarations_name_the_line_on_mock_nv():
  huge_regs = HEAD + ".visible .entry k(.param .u64 out) {\n.reg .b32 %r<100000000>;\nret;\n}\n"
  huge_local = HEAD + ".visible .entry k(.param .u64 out) {\n.local .align 4 .b8 big[1073741824];\nret;\n}\n"
  with _open() as dev:
    out = dev.alloc(64)
    prog = dev.load(huge_regs.encode())
    with pytest.raises(hcq.QueueError, match=r"robust-channel error 13 .*\[mock diagnosis\].*line 5: .*100000000"):
      prog(out, global_size=1, local_size=1, wait=True)
  with _open() as dev:
    out = dev.alloc(64)
    prog = dev.load(huge_local.encode())
    # the driver cannot give a thread 1 GiB of local memory (at most 512 KB): refused before anything is allocated
    with pytest.raises(hcq.DeviceError, match="kernel k: 1073741824 bytes of local memory a thread exceed the 524288"):
      prog(out, global_size=1, local_size=1, wait=True)
  with pytest.raises(PTXError, match=r"line 5: .*big.*1073741824"):      # the mock's SM would refuse it too
    parse(huge_local)


def test_a_store_at_the_top_of_the_address_space_names_the_address_line_and_instruction():
  text = HEAD + """.visible .entry k(.param .u64 out) {
  .reg .b64 %rd<3>;
  mov.u64 %rd1, -8;
  st.global.u64 [%rd1], %rd1;
  ret;
}
"""
  with _open() as dev:
    prog = dev.load(text.encode())
    out = dev.alloc(64)
    with pytest.raises(hcq.GPUFault) as e: prog(out, global_size=1, local_size=1, wait=True)
    assert e.value.address == 2**64 - 8
    msg = str(e.value)
    assert "MMU fault" in msg and "[mock diagnosis]" in msg and "at PTX line 7: st.global.u64 [%rd1], %rd1" in msg


def test_a_text_over_the_parsers_limit_is_refused_naming_both_sizes():
  from hcq.mockgpu.nv.ptx import parser
  text = HEAD + "// " + "x" * parser.MAX_TEXT + "\n"
  with pytest.raises(PTXError, match=rf"a PTX text of {len(text)} characters \(the mock reads at most {parser.MAX_TEXT}\)"):
    parse(text)
