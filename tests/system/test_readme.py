"""README (issue 2, Build 2): the Quick start block holds exactly the two commands, .ci/run runs the second one and
nothing else of substance, and every environment variable config.py reads is documented."""
import pathlib
import re

REPO = pathlib.Path(__file__).resolve().parents[2]


def quick_start_commands() -> list[str]:
  text = (REPO / "README.md").read_text()
  section = text.split("## Quick start", 1)[1]
  block = re.search(r"```(?:sh|bash|shell)\n(.*?)```", section, re.S).group(1)
  return [line for line in block.splitlines() if line.strip()]


def test_quick_start_has_two_commands_whose_scripts_exist():
  first, second = quick_start_commands()
  assert first == "bash scripts/install.sh && .venv/bin/hcq demo"
  assert second == "bash scripts/test.sh"
  for cmd in (first, second):
    for script in re.findall(r"bash (\S+\.sh)", cmd): assert (REPO / script).is_file(), script


def test_ci_runs_the_second_command_and_nothing_else():
  lines = [l.strip() for l in (REPO / ".ci" / "run").read_text().splitlines()]
  substance = [l for l in lines if l and not l.startswith("#") and not l.startswith(("set ", "cd "))]
  assert substance == [quick_start_commands()[1]], substance


def test_every_environment_variable_is_documented():
  names = set(re.findall(r'"(HCQ_[A-Z_]+)"', (REPO / "config.py").read_text()))
  assert len(names) >= 10
  readme = (REPO / "README.md").read_text()
  assert not [n for n in sorted(names) if f"`{n}`" not in readme]


def _commands_block() -> list[str]:
  section = (REPO / "README.md").read_text().split("## Commands", 1)[1]
  return re.search(r"```sh\n(.*?)```", section, re.S).group(1).splitlines()


def test_the_hcq_run_example_runs_as_written(tmp_path, monkeypatch, capsys):
  """Its code object is named by its path in the repository and its inputs are made by the line before it: run both
  (from a copy of the repository root's relevant part, on the mock GPU) and check c = a + b."""
  import shlex
  import subprocess
  import sys

  import numpy as np
  from hcq.cli import main
  lines = _commands_block()
  run = next(l for l in lines if l.startswith("hcq run "))
  make = lines[lines.index(run) - 1]
  assert make.startswith("python3 -c "), make
  argv = shlex.split(run.split("  #")[0])[1:]
  code_object = argv[1]
  assert (REPO / code_object).is_file(), f"the README's hcq run example names {code_object}, which does not exist"
  (tmp_path / code_object).parent.mkdir(parents=True)
  (tmp_path / code_object).symlink_to(REPO / code_object)
  subprocess.run([sys.executable, *shlex.split(make)[1:]], cwd=tmp_path, check=True, timeout=60)
  monkeypatch.chdir(tmp_path)
  assert main([*argv, "--device", "MOCK+AMD"]) == 0, capsys.readouterr().err
  a, b = np.load(tmp_path / "a.npy"), np.load(tmp_path / "b.npy")
  assert np.array_equal(np.load(tmp_path / "out" / "arg2.npy"), a + b)


def test_the_api_section_says_global_size_counts_work_groups():
  api = (REPO / "README.md").read_text().split("From Python", 1)[1].split("Benchmarks", 1)[0]
  assert re.search(r"`global_size` counts work-groups", api)
