"""The limits of the PTX interpreter and the mock NV GPU: declarations past the
hardware's limits and malformed directives are PTXErrors (not tracebacks, not gigabytes of memory or minutes of
parsing), and an endless kernel in the threaded mock does not hold host calls for ever."""
from __future__ import annotations

import time
import tracemalloc

import pytest

import hcq
from hcq.config import Config
from hcq.mockgpu.nv.ptx import PTXError, parse
from tests.hangguard import ends

HEAD = ".version 8.0\n.target sm_90\n.address_size 64\n"


@pytest.mark.parametrize("body, match", [
  (".visible .entry k() { .reg .b32 %r<2000000000>; ret; }", "more than 1048576 registers"),
  (".visible .entry k() { .shared .b8 s[99999999999999]; ret; }", "a .shared variable of 99999999999999 bytes"),
  (".visible .entry k() { .local .b8 l[1048577]; ret; }", "a .local variable of 1048577 bytes"),
  (".global .b8 g[100000000000] = {1};", "a .global variable of 100000000000 bytes"),
])
def test_declarations_past_the_hardware_limits_are_refused_at_once(body, match):
  # refused before anything of the declared size is made: the parse allocates a few MiB at most (a counted measure,
  # not a time: a parser that built the declared registers or bytes would need gigabytes)
  tracemalloc.start()
  try:
    with pytest.raises(PTXError, match=match): parse(HEAD + body)
    peak = tracemalloc.get_traced_memory()[1]
  finally: tracemalloc.stop()
  assert peak < 64 << 20, f"the refused declaration made {peak} bytes"


@pytest.mark.parametrize("text", [".version\n", ".version 8.0\n.target sm_90\n.address_size\n",
                                  ".version 8.0\n.target sm_90\n.address_size x\n"])
def test_malformed_directives_are_ptx_errors(text):
  with pytest.raises(PTXError, match="PTX"): parse(text)


SPIN = (HEAD + ".visible .entry spin(.param .u64 p)\n{\n.reg .b32 %r<2>;\nmov.u32 %r1, 0;\n$L:\nadd.u32 %r1, %r1, 1;\n"
        "bra.uni $L;\n}\n").encode()


def test_an_endless_kernel_in_the_threaded_mock_does_not_hold_host_calls_for_ever():
  """The worker holds the mock GPU's lock while a kernel runs: an alloc used to wait for as long as the kernel ran
  (for ever). Past twice the device timeout the mock ends the kernel (Xid 8), after the host's own wait timed out."""
  dev = hcq.open("MOCK+NV", config=Config(timeout_s=0.3, mock_threaded=True))
  try:
    dev.load(SPIN)(0, global_size=1, local_size=32)
    time.sleep(0.05)
    try: ends(lambda: dev.free(dev.alloc(1 << 20)))       # ends: the mock ends the kernel past its time limit
    except hcq.QueueError as e: assert "error 8" in str(e)     # the kernel was ended meanwhile: named
  finally:
    try: ends(dev.close)
    except hcq.HCQError: pass
