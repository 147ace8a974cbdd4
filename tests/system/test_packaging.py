"""Packaging (issue 2, Build 1): what setup.py installs as the package `hcq` and its console scripts (generated
modules import without libclang: tests/autogen/test_runtime.py)."""
import importlib.metadata
import pathlib
import shutil
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parents[2]


def _copy_sources(dest: pathlib.Path) -> None:
  """The committed files setup.py packages (a copy: a build writes build/ and *.egg-info next to setup.py)."""
  files = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, text=True, check=True).stdout
  for rel in files.split("\0"):
    if not rel or rel.startswith(("tests/", "bench/", "scripts/")): continue
    src, dst = REPO / rel, dest / rel
    if not src.is_file(): continue
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dst)


def test_build_installs_the_root_folders_as_hcq_and_nothing_else(tmp_path):
  """What a build by pip installs lies under hcq/. pip runs setup.py from its own helper script (sys.argv[0] is
  pip's in-process hook, not setup.py), so setuptools' "skip the running setup script" rule does not apply."""
  src, out = tmp_path / "src", tmp_path / "build"
  _copy_sources(src)
  build = ("import sys; __file__ = 'setup.py'; "
           "sys.argv = ['/pip/_in_process.py', '-q', 'build_py', '--build-lib', sys.argv[1]]; "
           "exec(compile(open('setup.py').read(), 'setup.py', 'exec'))")
  r = subprocess.run([sys.executable, "-c", build, str(out)], cwd=src, capture_output=True, text=True, timeout=300)
  assert r.returncode == 0, r.stderr[-3000:]
  top = {p.name for p in out.iterdir()}
  assert top == {"hcq"}, top
  pkg = out / "hcq"
  names = {p.name for p in pkg.iterdir()}
  for want in ("__init__.py", "config.py", "errors.py", "autogen", "cli", "compiler", "drivers", "mockgpu", "smi"):
    assert want in names, want
  assert "setup.py" not in names and "tests" not in names and "scripts" not in names, names
  assert (pkg / "autogen" / "manifest.json").is_file() and (pkg / "autogen" / "amd" / "gc_11_0_0.py").is_file()
  assert (pkg / "drivers" / "system" / "linux.py").is_file() and (pkg / "smi" / "cli.py").is_file()


def test_console_scripts():
  eps = {e.name: e.value for e in importlib.metadata.entry_points(group="console_scripts") if e.name in ("hcq", "hcq-smi")}
  assert eps == {"hcq": "hcq.cli:main", "hcq-smi": "hcq.smi:main"}
  assert importlib.metadata.metadata("hcq")["Requires-Python"] == ">=3.11"
