"""Every hcq subcommand (not rdma, whose owner tests it; not hcq-smi) over a table of bad inputs: a one-line error on
stderr and the exit status of the class of the problem (2: the command line; 1: a failure), never a traceback.
And output piped into a reader that stops early ends each command quietly."""
import pathlib
import struct

import numpy as np
import pytest

import hcq
from hcq.cli import main
from hcq.drivers.amd import pm4
from tests.pipes import first_line_then_close

DEMO = str(pathlib.Path(hcq.__file__).parent / "drivers" / "amd" / "kernels" / "demo.hsaco")
USAGE, FAIL = 2, 1


@pytest.fixture(scope="module")
def files(tmp_path_factory):
  d = tmp_path_factory.mktemp("inputs")
  np.save(d / "a.npy", np.arange(64, dtype=np.float32))
  np.save(d / "objects.npy", np.array(["x", "y"]))
  (d / "cut.npy").write_bytes((d / "a.npy").read_bytes()[:60])
  (d / "afile").write_text("not a folder")
  (d / "odd.bin").write_bytes(b"\xff\xfe\x01")
  (d / "big.txt").write_text("0x123456789")
  (d / "hex.txt").write_text("abc")
  (d / "text.txt").write_text("hello, not code\n")
  return d


def vadd(d, *extra, out=None):
  return ["run", DEMO, "--kernel", "vadd", "--device", "MOCK+AMD", "--out", str(out or d / "out"), *extra]


ARGS = ["64:float32", "64:float32", "64:float32", "=64"]
# (id, argv from the inputs folder, environment, exit status, words the error must hold)
CASES = [
  ("no command", lambda d: [], {}, USAGE, "usage"),
  ("unknown command", lambda d: ["bogus"], {}, USAGE, "invalid choice"),
  ("demo: bad -n", lambda d: ["demo", "-n", "x"], {}, USAGE, "-n"),
  ("demo: zero -m", lambda d: ["demo", "-m", "0"], {}, USAGE, "-m"),
  ("demo: unknown device", lambda d: ["demo", "--device", "BOGUS"], {}, USAGE, "BOGUS"),
  ("demo: device index not a number", lambda d: ["demo", "--device", "MOCK+AMD:x"], {}, USAGE, "index 'x'"),
  ("decode: unknown interface", lambda d: ["decode", "--device", "NOPE+AMD"], {}, USAGE, "no interface 'NOPE'"),
  ("kernels: unknown vendor", lambda d: ["kernels", "--device", "MOCK+NOPE"], {}, USAGE, "unknown vendor"),
  ("demo: huge -n", lambda d: ["demo", "--device", "MOCK+AMD", "-n", str(1 << 45)], {}, FAIL, "memory"),
  ("demo: bad HCQ_TIMEOUT", lambda d: ["demo", "--device", "MOCK+AMD"], {"HCQ_TIMEOUT": "abc"}, USAGE, "HCQ_TIMEOUT"),
  ("demo: HCQ_TIMEOUT=0", lambda d: ["demo", "--device", "MOCK+AMD"], {"HCQ_TIMEOUT": "0"}, USAGE, "HCQ_TIMEOUT"),
  ("demo: HCQ_MOCK_BUDGET<0", lambda d: ["demo", "--device", "MOCK+AMD"], {"HCQ_MOCK_BUDGET": "-5"}, USAGE, "HCQ_MOCK_BUDGET"),
  ("demo: HCQ_MOCK_THREADED=2", lambda d: ["demo", "--device", "MOCK+AMD"], {"HCQ_MOCK_THREADED": "2"}, USAGE, "HCQ_MOCK_THREADED"),
  ("run: no arguments", lambda d: ["run"], {}, USAGE, "CODE_OBJECT"),
  ("run: unknown option", lambda d: vadd(d, "--bogus", *ARGS), {}, USAGE, "--bogus"),
  ("run: letters in --grid", lambda d: vadd(d, "--grid", "a", *ARGS), {}, USAGE, "--grid"),
  ("run: 4 dims in --grid", lambda d: vadd(d, "--grid", "1,1,1,1", *ARGS), {}, USAGE, "--grid"),
  ("run: zero --grid", lambda d: vadd(d, "--grid", "0", *ARGS), {}, USAGE, "--grid"),
  ("run: float --block", lambda d: vadd(d, "--block", "1.5", *ARGS), {}, USAGE, "--block"),
  ("run: negative --block", lambda d: vadd(d, "--block", "-64", *ARGS), {}, USAGE, "--block"),
  ("run: --block over 1024", lambda d: vadd(d, "--block", "2048", *ARGS), {}, FAIL, "local_size"),
  ("run: unknown dtype", lambda d: vadd(d, "4096:floatx", *ARGS[1:]), {}, USAGE, "floatx"),
  ("run: object dtype", lambda d: vadd(d, "4096:O", *ARGS[1:]), {}, USAGE, "object"),
  ("run: string dtype", lambda d: vadd(d, "4096:U3", *ARGS[1:]), {}, USAGE, "U3"),
  ("run: zero elements", lambda d: vadd(d, "0:float32", *ARGS[1:]), {}, USAGE, "0:float32"),
  ("run: not an argument", lambda d: vadd(d, "x", *ARGS[1:]), {}, USAGE, "'x'"),
  ("run: not a number", lambda d: vadd(d, *ARGS[:3], "=abc"), {}, USAGE, "abc"),
  ("run: too few arguments", lambda d: vadd(d, *ARGS[:3]), {}, FAIL, "takes 4 arguments"),
  ("run: scalar for a buffer", lambda d: vadd(d, "=1", *ARGS[1:]), {}, FAIL, "needs a Buffer"),
  ("run: huge buffer", lambda d: vadd(d, f"{1 << 46}:float32", *ARGS[1:]), {}, FAIL, "memory"),
  ("run: missing code object", lambda d: ["run", str(d / "nope.hsaco"), *ARGS], {}, FAIL, "nope.hsaco"),
  ("run: folder as code object", lambda d: ["run", str(d), *ARGS], {}, FAIL, "is a folder"),
  ("run: text as code object", lambda d: ["run", str(d / "text.txt"), "--device", "MOCK+AMD", *ARGS], {}, FAIL,
   "not an ELF"),
  ("run: unknown kernel", lambda d: ["run", DEMO, "--kernel", "nope", "--device", "MOCK+AMD", "--out", str(d / "o"),
                                     *ARGS], {}, FAIL, "nope"),
  ("run: missing .npy", lambda d: vadd(d, str(d / "nope.npy"), *ARGS[1:]), {}, FAIL, "nope.npy"),
  ("run: cut .npy", lambda d: vadd(d, str(d / "cut.npy"), *ARGS[1:]), {}, FAIL, "cut.npy"),
  ("run: .npy of strings", lambda d: vadd(d, str(d / "objects.npy"), *ARGS[1:]), {}, FAIL, "objects.npy"),
  ("run: --out is a file", lambda d: vadd(d, *ARGS, out=d / "afile"), {}, USAGE, "afile"),
  ("run: --out under a file", lambda d: vadd(d, *ARGS, out=d / "afile" / "sub"), {}, FAIL, "afile"),
  ("run: unknown device", lambda d: ["run", DEMO, "--kernel", "vadd", "--device", "BOGUS", *ARGS], {}, USAGE, "BOGUS"),
  ("run: bad device index", lambda d: ["run", DEMO, "--kernel", "vadd", "--device", "MOCKPCI+AMD:0000:03:00.0", *ARGS], {},
   USAGE, "not a non-negative integer"),
  ("run: bad HCQ_DEBUG", lambda d: vadd(d, *ARGS), {"HCQ_DEBUG": "x"}, USAGE, "HCQ_DEBUG"),
  ("disasm: no file", lambda d: ["disasm"], {}, USAGE, "file"),
  ("disasm: missing file", lambda d: ["disasm", str(d / "nope")], {}, FAIL, "nope"),
  ("disasm: a folder", lambda d: ["disasm", str(d)], {}, FAIL, "is a folder"),
  ("disasm: not an ELF", lambda d: ["disasm", str(d / "text.txt")], {}, FAIL, "--raw"),
  ("disasm: unknown --mcpu", lambda d: ["disasm", "--raw", "--mcpu", "gfx9", str(d / "odd.bin")], {}, USAGE, "gfx9"),
  ("disasm: --kernel with --raw", lambda d: ["disasm", "--raw", "--kernel", "k", str(d / "odd.bin")], {}, USAGE, "--raw"),
  ("disasm: unknown --kernel", lambda d: ["disasm", DEMO, "--kernel", "nope"], {}, FAIL, "nope"),
  ("decode: nothing to decode", lambda d: ["decode"], {}, USAGE, "FILE"),
  ("decode: file and --device", lambda d: ["decode", "--device", "MOCK+AMD", str(d / "odd.bin")], {}, USAGE, "not both"),
  ("decode: unknown --engine", lambda d: ["decode", "--engine", "x", str(d / "odd.bin")], {}, USAGE, "--engine"),
  ("decode: missing file", lambda d: ["decode", str(d / "nope")], {}, FAIL, "nope"),
  ("decode: partial dword", lambda d: ["decode", str(d / "odd.bin")], {}, FAIL, "dword"),
  ("decode: broken packet", lambda d: ["decode", str(d / "hex.txt")], {}, FAIL, "not a PM4 type-3 header"),
  ("decode: 36-bit word", lambda d: ["decode", str(d / "big.txt")], {}, FAIL, "0x123456789"),
  ("decode: unknown device", lambda d: ["decode", "--device", "BOGUS"], {}, USAGE, "BOGUS"),
  ("decode: bad HCQ_TIMEOUT", lambda d: ["decode", "--device", "MOCK+AMD"], {"HCQ_TIMEOUT": "nan"}, USAGE, "HCQ_TIMEOUT"),
  ("kernels: unknown kernel", lambda d: ["kernels", "nope"], {}, USAGE, "nope"),
  ("kernels: unknown --show", lambda d: ["kernels", "--show", "x"], {}, USAGE, "--show"),
  ("kernels: unknown device", lambda d: ["kernels", "--device", "BOGUS", "elementwise_add"], {}, USAGE, "BOGUS"),
  ("kernels: HCQ_TIMEOUT=inf", lambda d: ["kernels", "elementwise_add"], {"HCQ_TIMEOUT": "inf"}, USAGE, "HCQ_TIMEOUT"),
  ("fw: no file", lambda d: ["fw"], {}, USAGE, "FILE"),
  ("fw: unknown option", lambda d: ["fw", "--bogus", str(d / "odd.bin")], {}, USAGE, "--bogus"),
  ("fw: missing file", lambda d: ["fw", str(d / "nope.bin")], {}, FAIL, "nope.bin"),
  ("fw: a folder", lambda d: ["fw", str(d)], {}, FAIL, "a folder"),
  ("fw: 3 bytes", lambda d: ["fw", str(d / "odd.bin")], {}, FAIL, "common header"),
  ("fw: text", lambda d: ["fw", "--json", str(d / "text.txt")], {}, FAIL, "not a firmware container"),
  ("am: no action", lambda d: ["am"], {}, USAGE, "ACTION"),
  ("am: bad --pci", lambda d: ["am", "boot", "--pci", "3:0.0"], {}, USAGE, "not a PCI address"),
  ("am: --pci and --mock", lambda d: ["am", "boot", "--mock", "--pci", "0000:03:00.0"], {}, USAGE, "not allowed"),
  ("am: unknown --until", lambda d: ["am", "boot", "--mock", "--until", "dcn"], {}, USAGE, "--until"),
  ("am: no firmware", lambda d: ["am", "boot", "--mock"], {"HCQ_FIRMWARE_DIR": "/nonexistent/amdgpu"}, FAIL, "/nonexistent/amdgpu: the firmware folder does not exist"),
  ("am: bad HCQ_TIMEOUT", lambda d: ["am", "boot", "--mock"], {"HCQ_TIMEOUT": "nan"}, USAGE, "HCQ_TIMEOUT"),
  ("devices: unknown option", lambda d: ["devices", "--bogus"], {}, USAGE, "--bogus"),
  ("devices: no sysfs", lambda d: ["devices"], {"HCQ_SYSFS_ROOT": "/nonexistent-sysfs"}, FAIL, "cannot list PCI functions"),
  ("devices: bad HCQ_TIMEOUT", lambda d: ["devices"], {"HCQ_TIMEOUT": "nan"}, USAGE, "HCQ_TIMEOUT"),
  ("trace: no action", lambda d: ["trace"], {}, USAGE, "ACTION"),
  ("trace plot: missing file", lambda d: ["trace", "plot", str(d / "nope.json")], {}, FAIL, "nope.json"),
  ("trace plot: not JSON", lambda d: ["trace", "plot", str(d / "odd.bin")], {}, FAIL, "not JSON"),
  ("fw fetch: a file too", lambda d: ["fw", "fetch", str(d / "odd.bin")], {}, USAGE, "takes no FILE"),
  ("selfcheck: an argument", lambda d: ["selfcheck", "x"], {}, USAGE, "unrecognized"),
  ("selfcheck: bad HCQ_DEBUG", lambda d: ["selfcheck"], {"HCQ_DEBUG": "-1"}, USAGE, "HCQ_DEBUG"),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input(case, files, monkeypatch, capsys):
  _, argv, env, status, words = case
  for k, v in env.items(): monkeypatch.setenv(k, v)
  try: rc = main(argv(files))
  except BaseException as e:   # noqa: BLE001 - what escapes main is the failure this test looks for
    pytest.fail(f"main() raised {type(e).__name__}: {e}")
  out, err = capsys.readouterr()
  assert "Traceback" not in out + err
  assert rc == status, (rc, err)
  assert words in err, err
  if status == FAIL: assert err.startswith(f"hcq {argv(files)[0]}: error: ") and err.count("\n") == 1, err


def test_every_subcommand_is_in_the_table():
  """A new subcommand needs rows here (rdma is tested by its owner)."""
  from hcq.cli import build_parser
  sub = next(a for a in build_parser()._actions if a.dest == "command")
  covered = {c[1](pathlib.Path("/x"))[0] for c in CASES if c[1](pathlib.Path("/x"))}
  assert set(sub.choices) - {"rdma"} <= covered, set(sub.choices) - covered


def test_decode_into_a_closed_pipe_ends_quietly(tmp_path):
  """The reader goes away after one line: no BrokenPipeError traceback (the handler is main's, for every command)."""
  words = (pm4.wait_reg_mem(0x1000, 7) + pm4.dispatch_direct(8, 1, 1, 0x8005)) * 20_000   # ~3 MB of text
  path = tmp_path / "stream.bin"
  path.write_bytes(struct.pack(f"<{len(words)}I", *words))
  rc, first, err = first_line_then_close(["decode", str(path)])
  assert rc == 0 and "WAIT_REG_MEM" in first, (rc, first, err)
  assert "Traceback" not in err and "BrokenPipe" not in err and "Exception ignored" not in err, err


def test_a_broken_pipe_that_is_not_stdout_is_a_failure(monkeypatch, capsys):
  """Only a closed stdout is the reader being done; a BrokenPipeError from elsewhere is an error (exit 1)."""
  import hcq.cli.selfcheck as selfcheck
  def boom(args): raise BrokenPipeError(32, "Broken pipe")
  monkeypatch.setattr(selfcheck, "run", boom)
  monkeypatch.setattr(hcq.cli, "_parser", hcq.cli.build_parser)   # main's parser, built once, binds the original
  assert main(["selfcheck"]) == 1
  assert "hcq selfcheck: error:" in capsys.readouterr().err
