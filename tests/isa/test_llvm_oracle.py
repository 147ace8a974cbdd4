"""The llvm-mc-19 batch driver fails loudly: a tool that crashes, exits non-zero or hangs raises LLVMMCError (naming
the command, exit status and stderr) instead of returning no results that callers would zip over and check nothing;
lines llvm-mc rejects on purpose still come back as their error messages."""
import pytest

from hcq.autogen.isa import llvm_oracle


@pytest.mark.tools("llvm-mc-19")
def test_rejected_lines_are_results_not_failures():
  got = llvm_oracle.assemble(["v_frobnicate v1", "s_nop 0"])
  assert len(got) == 2
  assert isinstance(got[0], str) and "invalid instruction" in got[0]
  assert got[1] == ("s_nop 0", bytes([0x00, 0x00, 0x80, 0xbf]))
  # invalid bytes only warn: the probe decodes to nothing, the next one still decodes
  assert llvm_oracle.disassemble([bytes([0xff] * 4), bytes([0x00, 0x00, 0x80, 0xbf])])[1] == [("s_nop 0", bytes([0x00, 0x00, 0x80, 0xbf]))]


@pytest.mark.tools("llvm-mc-19")
def test_a_failing_tool_raises(monkeypatch):
  monkeypatch.setattr(llvm_oracle, "LLVM_MC", "false")   # exits 1 with no per-line diagnostics
  with pytest.raises(llvm_oracle.LLVMMCError, match=r"^false -arch=amdgcn .*exit status 1"):
    llvm_oracle.assemble(["s_nop 0"])
  with pytest.raises(llvm_oracle.LLVMMCError, match="exit status 1"):
    llvm_oracle.disassemble([bytes([0x00, 0x00, 0x80, 0xbf])])
  # outside assemble(), a line llvm-mc rejects is a failure too
  monkeypatch.setattr(llvm_oracle, "LLVM_MC", "llvm-mc-19")
  with pytest.raises(llvm_oracle.LLVMMCError, match=r"exit status 1; stderr ends: .*invalid instruction"):
    llvm_oracle._run(["llvm-mc-19", "-arch=amdgcn", "-mcpu=gfx1100", "-show-encoding"], "v_frobnicate v1\n")


def test_a_hanging_tool_times_out(monkeypatch):
  monkeypatch.setattr(llvm_oracle, "TIMEOUT_S", 0.2)
  with pytest.raises(llvm_oracle.LLVMMCError, match=r"^sleep 30: no answer within 0.2 s"):
    llvm_oracle._run(["sleep", "30"], "")


@pytest.mark.tools("llvm-mc-19")
def test_a_probe_that_crashes_llvm_mc_is_undecodable(tmp_path, monkeypatch):
  # a stand-in llvm-mc that dies of SIGSEGV whenever its input holds the byte 0xee and otherwise is llvm-mc-19:
  # the batch is split until the crashing probe stands alone; the other probes still decode
  fake = tmp_path / "llvm-mc"
  fake.write_text('#!/bin/sh\nin=$(cat)\ncase "$in" in *0xee*) kill -SEGV $$;; esac\nprintf "%s\\n" "$in" | llvm-mc-19 "$@"\n')
  fake.chmod(0o755)
  monkeypatch.setattr(llvm_oracle, "LLVM_MC", str(fake))
  nop = bytes([0x00, 0x00, 0x80, 0xbf])
  got = llvm_oracle.disassemble([nop, bytes([0xee] * 4), nop])
  assert got == [[("s_nop 0", nop)], [], [("s_nop 0", nop)]]
