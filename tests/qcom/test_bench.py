"""bench/qcom.py's numbers mean what they say: its fiber-instruction count equals the emulator's own count."""
from __future__ import annotations

import importlib.util
import pathlib

import hcq

BENCH = pathlib.Path(__file__).resolve().parents[2] / "bench" / "qcom.py"


def test_the_bench_counts_the_instructions_the_emulator_runs():
  spec = importlib.util.spec_from_file_location("bench_qcom", BENCH)
  bench = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(bench)
  with hcq.open("MOCK+QCOM") as dev:
    cp = dev.owned_os.devices[0].cp            # the mock's command processor counts fiber-instructions it ran
    lo = bench.launch_overhead(dev, 5)
    assert lo["queued_us"] > 0 and lo["waited_us"] > 0
    before = cp.instructions
    r = bench.emulator_rate(dev, iterations=7, groups=2, runs=1)
    # emulator_rate's warm-up launch runs one group; the measured one runs `groups`
    assert cp.instructions - before == r["fiber_instructions"] * 3 // 2


def test_the_ir3_emulator_bench_checks_its_results_and_counts_what_ran():
  spec = importlib.util.spec_from_file_location("bench_ir3_emu", BENCH.parent / "ir3_emu.py")
  bench = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(bench)
  with hcq.open("MOCK+QCOM") as dev:
    cp = dev.owned_os.devices[0].cp
    v = bench.vadd(dev, cp, 256, runs=1)
    # vadd.asm: 10 instructions per fiber (a nop with (rptN) counts once)
    assert v["fiber_instructions"] == 256 * 10 and v["mfips"] > 0
    lp = bench.loop(dev, cp, 2, runs=1)
    # loop.asm: fiber lid runs 3 + (lid + 1) * 6 + 3 instructions
    assert lp["fiber_instructions"] == 2 * sum(6 + 6 * (lid + 1) for lid in range(64))
    rd = bench.reduce(dev, cp, 2, runs=1)
    assert rd["fiber_instructions"] > 2 * 64 * 20 and rd["mfips"] > 0
    a = bench.alu_loop(dev, cp, 2, 3, runs=1)
    assert a["fiber_instructions"] == 128 * (7 + 3 * 12 + 3)
