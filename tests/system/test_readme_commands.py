"""Every command line of the README's Commands section, and its Python example, run as written from a fresh clone.

The clone is `git clone` of this checkout (its committed state) into a temporary folder; the commands run there as a
reader's would after the Quick start and `source .venv/bin/activate`: the environment running these tests is that
.venv (its bin folder first on PATH). Lines that need hardware are skipped by name with the reason; the one that takes
minutes runs under `-m slow`. Lock files go to a temporary folder (hcq-smi kill_pids signals nobody of this machine).
"""
from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
BIN = pathlib.Path(sys.executable).parent

# lines that cannot run without hardware, each with the reason
NEEDS_HARDWARE = {
  "hcq am reset --pci 0000:03:00.0": "needs an AMD GPU at 0000:03:00.0 that hcq may take (PCI+AMD, amdgpu unbound)",
}
# lines that run for minutes: `-m slow`
SLOW = {
  "python -m hcq.autogen --check": "regenerates every binding with libclang and diffs it (minutes)",
}
# lines that need an optional extra: (module, reason) -- skipped where it is not installed
NEEDS_EXTRA = {
  "hcq trace plot demo.json -o timeline.png": ("matplotlib", "needs matplotlib, the optional [plot] extra"),
}
# lines whose exit status is an answer, not success: 0 or 1 both mean the command ran
ANSWERS = ("--expect",)


def _section(name: str) -> str:
  text = (REPO / "README.md").read_text()
  return text.split(f"## {name}", 1)[1].split("\n## ", 1)[0]


def command_lines() -> list[str]:
  block = re.search(r"```sh\n(.*?)```", _section("Commands"), re.S).group(1)
  lines = []
  for line in block.splitlines():
    if not line.strip() or line.lstrip().startswith("#"): continue
    cmd = re.split(r"\s+#\s", line, maxsplit=1)[0].rstrip()   # the trailing comment is for the reader
    lines.append(cmd)
  return lines


def python_example() -> str:
  return re.search(r"```python\n(.*?)```", _section("Commands"), re.S).group(1)


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
  if shutil.which("git") is None or not (REPO / ".git").exists(): pytest.skip("needs git and a git checkout to clone")
  if not (BIN / "hcq").exists() or not (BIN / "hcq-smi").exists():
    pytest.skip(f"hcq is not installed as a command in {BIN} (run scripts/install.sh)")
  dest = tmp_path_factory.mktemp("readme") / "hcq"
  subprocess.run(["git", "clone", "--quiet", str(REPO), str(dest)], check=True, capture_output=True, timeout=120)
  locks = dest.parent / "locks"
  locks.mkdir()
  env = dict(os.environ, PATH=f"{BIN}:{os.environ.get('PATH', '/usr/bin:/bin')}", VIRTUAL_ENV=str(BIN.parent),
             HCQ_LOCK_DIR=str(locks))
  env.pop("HCQ_DEV", None)
  return dest, env


def _run(cmd: str, clone, timeout: float = 120):
  dest, env = clone
  return subprocess.run(["bash", "-c", f"set -o pipefail; {cmd}"], cwd=dest, env=env, capture_output=True, text=True,
                        timeout=timeout)


def test_the_commands_section_is_what_this_test_runs():
  lines = command_lines()
  assert len(lines) >= 20 and lines[0] == "hcq demo"
  assert not [l for l in lines if re.search(r"\[|\]|\bFILE\b|\bNAME\b|\bADDR\b|K\.hsaco", l)], \
    "a line with a placeholder or optional part cannot run as written"
  for cmd in list(NEEDS_HARDWARE) + list(SLOW) + list(NEEDS_EXTRA): assert cmd in lines, f"{cmd!r} is no longer in the README"


@pytest.mark.parametrize("cmd", [c for c in command_lines() if c not in SLOW])
def test_a_readme_command_runs_as_written_in_a_fresh_clone(cmd, clone):
  if cmd in NEEDS_HARDWARE: pytest.skip(NEEDS_HARDWARE[cmd])
  if cmd in NEEDS_EXTRA:
    module, reason = NEEDS_EXTRA[cmd]
    pytest.importorskip(module, reason=reason)
  r = _run(cmd, clone)
  ok = (0, 1) if any(a in cmd for a in ANSWERS) else (0,)
  assert r.returncode in ok, f"{cmd}: exit {r.returncode}\nstdout: {r.stdout[-2000:]}\nstderr: {r.stderr[-2000:]}"
  assert "Traceback" not in r.stderr, r.stderr


@pytest.mark.slow
@pytest.mark.parametrize("cmd", list(SLOW))
def test_a_slow_readme_command_runs_as_written_in_a_fresh_clone(cmd, clone):
  r = _run(cmd, clone, timeout=1800)
  assert r.returncode == 0, f"{cmd}: exit {r.returncode}\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}"


def test_the_python_example_runs_as_written_in_a_fresh_clone(clone):
  dest, env = clone
  r = subprocess.run([str(BIN / "python"), "-c", python_example()], cwd=dest, env=env, capture_output=True, text=True,
                     timeout=120)
  assert r.returncode == 0, r.stderr
  assert r.stdout.startswith("[0. 2. 4. 6.]"), r.stdout


def test_the_bench_list_names_every_bench_script():
  text = (REPO / "README.md").read_text()
  listed = set(re.findall(r"`bench/([\w.]+)`", text))
  assert listed == {p.name for p in (REPO / "bench").iterdir() if p.suffix in (".py", ".sh", ".md")}
