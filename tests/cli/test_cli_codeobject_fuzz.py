"""Seeded fuzz of code objects through `hcq disasm` and `hcq run` (on the mock GPU, MOCK+AMD): bit flips (anywhere, or
in the metadata note), truncations and byte insertions of the committed code objects. Every case either succeeds or
exits 1 with a one-line hcq error: never a traceback, another exit status, or a hang (a per-case alarm)."""
import contextlib
import io
import pathlib
import random
import signal

import pytest

import hcq
from hcq.cli import main
from hcq.compiler.isa.amd.codeobject import CodeObject

ROOT = pathlib.Path(hcq.__file__).parent
SOURCES = sorted((ROOT / "tests" / "fixtures" / "opencl" / "hsaco").glob("*.hsaco")) + \
          [ROOT / "drivers" / "amd" / "kernels" / "demo.hsaco"]
CASE_SECONDS = 60   # one case: parse, load, one small launch on the mock (bounded by HCQ_MOCK_BUDGET)


class Hang(Exception):
  pass


def _run_argv(co: CodeObject) -> list[str]:
  """`hcq run` options that launch the last kernel of the unmutated code object: a small buffer per pointer."""
  k = max(co.kernels.values(), key=lambda k: k.name)
  args = ["4096:uint8" if a.value_kind == "global_buffer" else "=256" if a.value_kind == "dynamic_shared_pointer"
          else "=16" for a in k.explicit_args]
  block = k.reqd_workgroup_size or (32,)
  return ["--kernel", k.name, "--block", ",".join(map(str, block)), "--device", "MOCK+AMD", *args]


def _note_range(co: CodeObject) -> tuple[int, int]:
  sec = next(s for s in co.elf.sections if s.name == ".note")
  return sec.offset, sec.offset + sec.size


@pytest.fixture(scope="module")
def sources():
  out = []
  for path in SOURCES:
    data = path.read_bytes()
    co = CodeObject.parse(data)
    out.append((path.name, data, _run_argv(co), _note_range(co)))
  return out


def mutate(rng: random.Random, data: bytes, note: tuple[int, int]) -> tuple[str, bytes]:
  b = bytearray(data)
  how = rng.choice(["flip", "flip", "flip note", "truncate", "insert"])
  if how.startswith("flip"):
    lo, hi = note if how == "flip note" else (0, len(b))
    for _ in range(rng.randint(1, 4)):
      b[rng.randrange(lo, hi)] ^= 1 << rng.randrange(8)
  elif how == "truncate":
    del b[rng.randrange(len(b)):]
  else:
    at = rng.randrange(len(b) + 1)
    b[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
  return how, bytes(b)


def _alarm(signum, frame): raise Hang()


def _check(argv: list[str], what: str) -> None:
  out, err = io.StringIO(), io.StringIO()
  old = signal.signal(signal.SIGALRM, _alarm)
  signal.alarm(CASE_SECONDS)
  try:
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err): rc = main(argv)
  except Hang:
    pytest.fail(f"{what}: hcq {argv[0]} ran longer than {CASE_SECONDS} s")
  except BaseException as e:   # noqa: BLE001 - anything escaping main is a traceback for the user
    pytest.fail(f"{what}: hcq {argv[0]} raised {type(e).__name__}: {e}")
  finally:
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)
  text = err.getvalue()
  assert "Traceback" not in text + out.getvalue(), f"{what}: {text}"
  assert rc in (0, 1), f"{what}: hcq {argv[0]} exited {rc}: {text}"
  if rc == 1: assert text.startswith(f"hcq {argv[0]}: error: ") and text.count("\n") == 1, f"{what}: {text!r}"


def _fuzz(seed: int, cases: int, sources, tmp_path, monkeypatch) -> None:
  monkeypatch.setenv("HCQ_MOCK_BUDGET", "2000000")   # a mutated loop ends as a budget error, soon
  monkeypatch.setenv("HCQ_TIMEOUT", "20")
  rng = random.Random(seed)
  path, out = tmp_path / "case.hsaco", tmp_path / "out"
  for i in range(cases):
    name, data, run_argv, note = rng.choice(sources)
    how, blob = mutate(rng, data, note)
    path.write_bytes(blob)
    what = f"seed {seed} case {i} ({how} of {name})"
    _check(["disasm", str(path)], what)
    _check(["run", str(path), "--out", str(out), *run_argv], what)


def test_unmutated_sources_launch(sources, tmp_path, capsys):
  """The cases below start from code objects that load and launch with these options: each runs, or its kernel
  faults on the mock (a kernel that wants other sizes than these generic ones)."""
  for path, (name, _, run_argv, _) in zip(SOURCES, sources):
    rc = main(["run", str(path), "--out", str(tmp_path), *run_argv])
    err = capsys.readouterr().err
    assert rc == 0 or (rc == 1 and ": GPU " in err), (name, err)


def test_fuzz_code_objects(sources, tmp_path, monkeypatch):
  _fuzz(20261201, 400, sources, tmp_path, monkeypatch)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(8))
def test_fuzz_code_objects_long(seed, sources, tmp_path, monkeypatch):
  _fuzz(seed, 2000, sources, tmp_path, monkeypatch)
