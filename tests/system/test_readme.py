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
