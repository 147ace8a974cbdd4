"""The C backend's cache of shared objects is trusted (what is found there is dlopen-ed and runs as its user), so
another local user must have no way to put anything in it or to make hcq write through a name they chose.

The attack these tests replay: another user creates the cache folder first (it used to be the predictable
<tmp>/hcq-c-cache-<uid>), or plants a file with the expected name, or a symbolic link at a temporary file's name.
Each test plants in the old shared-temp location AND in the configured cache folder (HCQ_CACHE_DIR), so that it
fails for a backend that uses either. A planted shared object writes a marker file when it is loaded.
"""
import hashlib
import os
import re
import subprocess
import tempfile
from types import SimpleNamespace

import numpy as np
import pytest

import hcq
from hcq.compiler import KernelInfo, UOp, compile as compile_kernel, dtypes
from hcq.compiler.backend.c import CC_FLAGS
from hcq.errors import HCQError

pytestmark = pytest.mark.tools("cc")
N = 8
WANT = [3 * i + 1 for i in range(N)]
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="giving a folder or file to another user (chown) needs "
                                                          "root; CI runs the tests as root")
OTHER_UID = 12345


def probe_sink():
  out, a = UOp.param(0, dtypes.int32, N), UOp.param(1, dtypes.int32, N, readonly=True)
  g = UOp.special(N, "gidx0")
  return out.index(g).store(a.index(g).load() * 3 + 1).sink(arg=KernelInfo("cache_probe"))


SOURCE = compile_kernel(probe_sink(), "c").source
KERNEL_SO = f"k_{hashlib.sha256(('cc' + ' '.join(CC_FLAGS) + SOURCE).encode()).hexdigest()[:24]}.so"


def cc(source: str, out) -> bytes:
  src = f"{out}.c"
  with open(src, "w") as f: f.write(source)
  subprocess.run(["cc", *CC_FLAGS, "-o", str(out), src, "-lm"], check=True, capture_output=True, timeout=120)
  return open(out, "rb").read()


@pytest.fixture
def where(tmp_path, monkeypatch):
  tmp = tmp_path / "tmp"
  tmp.mkdir()
  tmp.chmod(0o1777)
  monkeypatch.setattr(tempfile, "tempdir", str(tmp))   # the shared temp folder, where the other user plants
  cache = tmp_path / "cache"
  monkeypatch.setenv("HCQ_CACHE_DIR", str(cache))
  w = SimpleNamespace(tmp=tmp, cache=cache, kernels=cache / "c", legacy=tmp / f"hcq-c-cache-{os.getuid()}",
                      marker=tmp_path / "marker", planted=tmp_path / "planted" / "evil.so")
  # the planted object is the real kernel plus a constructor that leaves the marker: loading it is the exploit
  w.planted.parent.mkdir()
  evil = "#include <stdio.h>\n" + SOURCE + \
    f'__attribute__((constructor)) static void planted(void) {{ FILE* f = fopen("{w.marker}", "w"); ' \
    f'if (f) {{ fputs("planted code ran", f); fclose(f); }} }}\n'
  w.planted_bytes = cc(evil, w.planted)
  return w


def run_compiled() -> list:
  with hcq.open("CPU") as dev:
    a, out = dev.alloc(4 * N), dev.alloc(4 * N)
    dev.copyin(a, np.arange(N, dtype=np.int32))
    dev.compile(probe_sink())(out, a, global_size=(N, 1, 1), local_size=(1, 1, 1))
    return np.frombuffer(dev.copyout(out), np.int32).tolist()


def run_loaded(image: bytes) -> list:
  with hcq.open("CPU") as dev:
    a, out = dev.alloc(4 * N), dev.alloc(4 * N)
    dev.copyin(a, np.arange(N, dtype=np.int32))
    dev.load(image, name="cache_probe")(out, a, global_size=(N, 1, 1), local_size=(1, 1, 1))
    return np.frombuffer(dev.copyout(out), np.int32).tolist()


def make_folder(path, mode=0o700):
  path.mkdir(parents=True, exist_ok=True)
  path.chmod(mode)
  return path


def plant_file(folder, name, w, how):
  """Put the planted object in folder/name: 'symlink' (a link to it), 'loose' (a copy others may write), 'foreign'
  (a copy another user owns), 'copy' (a copy of ours, mode 700: only its bytes are wrong)."""
  p = folder / name
  if how == "symlink": p.symlink_to(w.planted)
  else:
    p.write_bytes(w.planted_bytes)
    p.chmod(0o777 if how == "loose" else 0o755)
    if how == "foreign": os.chown(p, OTHER_UID, OTHER_UID)
  return p


def spoil(path, w, how):
  """Make `path` (a cache folder holding the planted object under the expected name) untrustworthy."""
  if how == "symlink":
    real = make_folder(w.planted.parent / f"real-{path.name}")
    path.symlink_to(real)
    return real
  make_folder(path, 0o777 if how == "loose" else 0o700)
  if how == "foreign": os.chown(path, OTHER_UID, OTHER_UID)
  return path


def test_a_folder_planted_in_the_shared_temp_dir_is_not_used(where):
  """The reported attack: the folder a kernel cache used to have, made first by someone else, is never looked at."""
  make_folder(where.legacy, 0o777)
  plant_file(where.legacy, KERNEL_SO, where, "copy")
  assert run_compiled() == WANT
  assert not where.marker.exists()


PROBLEMS = {"loose": "others may write to it", "symlink": "a symbolic link", "foreign": f"owned by uid {OTHER_UID}"}


@pytest.mark.parametrize("level", ["cache_dir", "kernels"])
@pytest.mark.parametrize("how", ["loose", "symlink", pytest.param("foreign", marks=needs_root)])
def test_an_untrustworthy_cache_folder_is_refused(where, level, how):
  """A cache folder (HCQ_CACHE_DIR or its c/) that is a symbolic link, another user's, or writable by others is
  refused with an error naming it; nothing in it is loaded."""
  make_folder(where.legacy)
  plant_file(where.legacy, KERNEL_SO, where, "copy")
  if level == "cache_dir":
    bad = where.cache
    inner = spoil(bad, where, how)
    plant_file(make_folder(inner / "c"), KERNEL_SO, where, "copy")
  else:
    make_folder(where.cache)
    bad = where.kernels
    plant_file(spoil(bad, where, how), KERNEL_SO, where, "copy")
  with pytest.raises(HCQError, match=re.escape(str(bad)) + ".*" + PROBLEMS[how]):
    run_compiled()
  assert not where.marker.exists()


@pytest.mark.parametrize("how", ["symlink", "loose", pytest.param("foreign", marks=needs_root)])
def test_an_untrustworthy_cached_object_is_built_again(where, how):
  """In the cache folder, a file with the expected name is used only if it is a regular file of ours that nobody
  else may write; otherwise the kernel is built again and replaces it (a symbolic link's target is left alone)."""
  links = [plant_file(make_folder(folder), KERNEL_SO, where, how) for folder in (where.legacy, make_folder(where.cache) / "c")]
  assert run_compiled() == WANT
  assert not where.marker.exists()
  st = os.lstat(links[1])
  assert st.st_uid == os.geteuid() and st.st_mode & 0o022 == 0 and not os.path.islink(links[1])
  assert where.planted.read_bytes() == where.planted_bytes


@pytest.mark.parametrize("how", ["symlink", "loose", "copy", pytest.param("foreign", marks=needs_root)])
def test_a_loaded_object_is_taken_from_the_cache_only_if_it_is_ours_and_the_same_bytes(where, how, tmp_path):
  """dev.load(image) keeps the image as so_<hash>.so: a file of that name is used only if it is ours and holds
  exactly the image (a copy of ours with other bytes is rewritten too)."""
  image = cc(SOURCE, tmp_path / "good.so")
  name = f"so_{hashlib.sha256(image).hexdigest()[:24]}.so"
  for folder in (where.legacy, make_folder(where.cache) / "c"): plant_file(make_folder(folder), name, where, how)
  assert run_loaded(image) == WANT
  assert not where.marker.exists()
  assert (where.kernels / name).read_bytes() == image and not (where.kernels / name).is_symlink()
  assert where.planted.read_bytes() == where.planted_bytes


def test_temporary_files_are_not_written_through_planted_symlinks(where, tmp_path):
  """Every name the backend writes to is either random (made with O_EXCL) or replaced by a rename: a symbolic link
  planted at a name it could use (the old per-process temporary names, the kept source) is never written through."""
  image = cc(SOURCE, tmp_path / "good.so")
  digest, pid = KERNEL_SO[2:-3], os.getpid()
  so_name = f"so_{hashlib.sha256(image).hexdigest()[:24]}.so"
  names = [f"k_{digest}.{pid}.c", f"{KERNEL_SO}.{pid}.tmp", f"k_{digest}.c", f"{so_name}.{pid}.tmp"]
  victims = []
  for folder in (make_folder(where.legacy), make_folder(make_folder(where.cache) / "c")):
    for name in names:
      victim = tmp_path / f"victim-{len(victims)}"
      victim.write_text("keep")
      (folder / name).symlink_to(victim)
      victims.append(victim)
  assert run_compiled() == WANT
  assert run_loaded(image) == WANT
  assert [v.read_bytes() for v in victims] == [b"keep"] * len(victims)


def test_a_cache_folder_others_may_only_read_is_narrowed_and_used(where):
  """A folder of ours that others may read but not write (mode 755, as os.makedirs leaves it) holds nothing planted:
  it is kept and narrowed to 700."""
  make_folder(where.cache, 0o755)
  make_folder(where.kernels, 0o755)
  assert run_compiled() == WANT
  assert [os.stat(p).st_mode & 0o777 for p in (where.cache, where.kernels)] == [0o700, 0o700]
  assert (where.kernels / KERNEL_SO).is_file()


def test_the_cli_reports_an_untrustworthy_cache_without_a_traceback(where, capsys):
  from hcq.cli import main
  make_folder(where.cache, 0o777)
  assert main(["kernels", "--device", "CPU"]) == 1
  err = capsys.readouterr()
  text = err.out + err.err
  assert f"{where.cache}: others may write to it" in text and "Traceback" not in text
