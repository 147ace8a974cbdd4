"""issue 29 item 5: every input file of every command (hcq run's code object and .npy arrays, hcq disasm of both ISAs,
hcq decode of each stream kind, hcq fw) gets one check before it is read: a FIFO, a character device (/dev/zero,
endless), a folder, a symbolic link to any of them and a file over the size limit are each one error line naming
the file and what it is (exit 1), at once; a symbolic link to a good file is read.

The cases run in one child process with a memory cap and a time limit: without the check a FIFO blocks the open
for ever and /dev/zero is read until memory runs out, which must fail this test, not hang or exhaust the machine."""
import json
import os
import pathlib
import resource
import subprocess
import sys

import numpy as np
import pytest

import hcq
from hcq.cli.inputs import MAX_INPUT_BYTES

DEMO = str(pathlib.Path(hcq.__file__).parent / "drivers" / "amd" / "kernels" / "demo.hsaco")

# how each command takes its input file; {} is the file
COMMANDS = {
  "run code object": ["run", "{}", "--kernel", "vadd", "--device", "MOCK+AMD", "64:float32"],
  "run array": ["run", DEMO, "--kernel", "vadd", "--device", "MOCK+AMD", "{}", "64:float32", "64:float32", "=64"],
  "disasm amdgpu": ["disasm", "{}"],
  "disasm --raw": ["disasm", "--raw", "{}"],
  "disasm ir3": ["disasm", "--isa", "ir3", "--raw", "{}"],
  "decode pm4": ["decode", "{}"],
  "decode gpfifo": ["decode", "--engine", "gpfifo", "{}"],
  "decode qcom": ["decode", "--qcom", "{}"],
  "fw": ["fw", "{}"],
}
# what is at the path, and the words its error must hold
HOSTILE = {
  "fifo": "FIFO",
  "dev zero": "character device",
  "folder": "folder",
  "link to fifo": "FIFO",
  "link to dev zero": "character device",
  "huge": "bytes",
}

_CHILD = r"""
import contextlib, io, json, resource, sys
resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
from hcq.cli import main
out = {}
for key, argv in json.loads(sys.argv[1]).items():
  err = io.StringIO()
  with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
    try: rc = main(argv)
    except BaseException as e: rc = repr(e)
  out[key] = [rc, err.getvalue()]
  print(json.dumps({key: out[key]}), flush=True)
"""


def _make(d: pathlib.Path, kind: str) -> str:
  p = d / (kind.replace(" ", "_") + ".npy")     # `hcq run` takes an array argument by its .npy suffix
  if kind == "fifo": os.mkfifo(p)
  elif kind == "dev zero": return "/dev/zero"
  elif kind == "folder": p.mkdir()
  elif kind == "link to fifo":
    os.mkfifo(d / "fifo_target")
    os.symlink(d / "fifo_target", p)
  elif kind == "link to dev zero": os.symlink("/dev/zero", p)
  elif kind == "huge":
    with open(p, "wb") as f: f.truncate(MAX_INPUT_BYTES + 4096)    # sparse: costs no disk
  return str(p)


@pytest.fixture(scope="module")
def results(tmp_path_factory):
  d = tmp_path_factory.mktemp("hostile")
  paths = {kind: _make(d, kind) for kind in HOSTILE}
  cases = {}
  for cmd, argv in COMMANDS.items():
    for kind, path in paths.items():
      if _skipped(cmd, kind): continue
      cases[f"{cmd} | {kind}"] = [a.replace("{}", path) for a in argv]
  env = {**os.environ, "HCQ_FIRMWARE_DIR": str(d)}
  lines = []
  try:
    p = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(cases)], capture_output=True, text=True, timeout=120,
                       env=env, cwd=str(d))
    lines = p.stdout.splitlines()
  except subprocess.TimeoutExpired as e:
    lines = (e.stdout or b"").decode().splitlines() if isinstance(e.stdout, bytes) else (e.stdout or "").splitlines()
  got = {}
  for line in lines: got.update(json.loads(line))
  return cases, got


def _skipped(cmd: str, kind: str) -> bool:
  # an array is copied in chunks, never read whole, so it has no size limit (the device's memory is its limit); fw
  # has the firmware reader's own; /dev/zero is no .npy name (its link is)
  return kind == "huge" and cmd in ("run array", "fw") or kind == "dev zero" and cmd == "run array"


def _ids():
  for cmd in COMMANDS:
    for kind in HOSTILE:
      if not _skipped(cmd, kind): yield f"{cmd} | {kind}"


@pytest.mark.parametrize("case", list(_ids()))
def test_a_hostile_input_file_is_one_error_line_at_once(results, case):
  cases, got = results
  assert case in got, f"{case}: no answer within the time limit (blocked on the file, or read it without end)"
  rc, err = got[case]
  kind = case.split(" | ")[1]
  assert rc == 1, (rc, err)
  assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
  assert HOSTILE[kind] in err, err


def test_a_link_to_a_good_file_is_read(tmp_path, capsys):
  from hcq.cli import main
  (tmp_path / "words.txt").write_text("0xc0001000 0x0\n")     # a PM4 type-3 NOP with one body dword
  os.symlink(tmp_path / "words.txt", tmp_path / "link.txt")
  assert main(["decode", str(tmp_path / "link.txt")]) == 0
  assert "NOP" in capsys.readouterr().out


def test_standard_input_is_read_bounded(tmp_path):
  """`hcq decode -` with /dev/zero on stdin stops at the limit with an error, not at the end of memory."""
  with open("/dev/zero", "rb") as zero:
    p = subprocess.run([sys.executable, "-c", "import sys; from hcq.cli import main; sys.exit(main())", "decode", "-"], stdin=zero, capture_output=True, text=True,
                       timeout=60, preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30)))
  assert p.returncode == 1 and "standard input" in p.stderr and f"{MAX_INPUT_BYTES}" in p.stderr, p.stderr


def test_an_array_file_shorter_than_its_header_says_is_named(tmp_path, capsys):
  from hcq.cli import main
  np.save(tmp_path / "a.npy", np.arange(64, dtype=np.float32))
  (tmp_path / "cut.npy").write_bytes((tmp_path / "a.npy").read_bytes()[:-4])
  assert main(["run", DEMO, "--kernel", "vadd", "--device", "MOCK+AMD", "--out", str(tmp_path / "o"),
               str(tmp_path / "cut.npy"), "64:float32", "64:float32", "=64"]) == 1
  err = capsys.readouterr().err
  assert "cut.npy" in err and "252" in err, err
