"""The autogen package cache: what is unpacked there becomes committed code, so the cache must be this user's alone
(safefiles.private_dir), and nothing is written into it through a symbolic link planted at a name it uses."""
import hashlib
import json
import os

import pytest

from hcq.autogen import sources
from hcq.errors import HCQError

PKG = {"name": "hcq-test-package", "version": "1.0", "arch": "all", "members": []}


def test_the_cache_lock_is_not_opened_through_a_symlink(tmp_path):
  cache = tmp_path / "cache"
  cache.mkdir(mode=0o700)
  victim = tmp_path / "victim"
  victim.write_text("keep")
  (cache / ".lock").symlink_to(victim)
  with pytest.raises(sources.SourceError, match=r"cache/\.lock: cannot open the cache's lock file: it is a symbolic link"):
    sources.unpack({**PKG, "sha256": "0" * 64}, str(cache), log=lambda *a: None)
  assert victim.read_text() == "keep"


def test_a_package_taken_from_apt_archives_is_not_copied_through_a_symlink(tmp_path, monkeypatch):
  archives = tmp_path / "archives"
  archives.mkdir()
  fname = sources.deb_filename(PKG["name"], PKG["version"], PKG["arch"])
  (archives / fname).write_bytes(b"the pinned package")
  monkeypatch.setattr(sources, "APT_ARCHIVES", str(archives))
  debs = tmp_path / "cache" / "debs"
  debs.mkdir(parents=True)
  (tmp_path / "cache").chmod(0o700)
  victim = tmp_path / "victim"
  victim.write_text("keep")
  (debs / (fname + ".part")).symlink_to(victim)   # the old fixed temporary name
  pkg = {**PKG, "sha256": hashlib.sha256(b"the pinned package").hexdigest()}
  path = sources.fetch_deb(pkg, str(tmp_path / "cache"), log=lambda *a: None)
  assert victim.read_text() == "keep"
  assert open(path, "rb").read() == b"the pinned package" and not os.path.islink(path)


def test_a_cache_others_may_write_to_is_refused(tmp_path):
  """An unpacked tree is trusted by its stamp: in a folder others may write, both could have been planted."""
  cache = tmp_path / "cache"
  pkg = {**PKG, "sha256": "0" * 64}
  planted = cache / "src" / f"{PKG['name']}_{PKG['version']}"
  planted.mkdir(parents=True)
  (planted / ".hcq-unpacked").write_text(
    json.dumps({k: pkg.get(k) for k in ("sha256", "tarball", "strip", "members")}, sort_keys=True))
  cache.chmod(0o777)
  with pytest.raises(HCQError, match=f"{cache}: others may write to it"):
    sources.unpack(pkg, str(cache), log=lambda *a: None)


def test_each_member_list_unpacks_into_its_own_folder(tmp_path):
  """Two manifests asking other members of one package (two branches sharing a cache) get two trees: neither unpacks
  the other's again (they used to share one folder and re-extract it in turn, while the other's tests read it)."""
  cache = str(tmp_path / "cache")
  a = {**PKG, "members": ["include/uapi"]}
  b = {**PKG, "members": ["include/uapi", "drivers/gpu/drm/amd/include/discovery.h"]}
  assert sources.unpack_dir(a, cache) != sources.unpack_dir(b, cache)
  assert sources.unpack_dir(a, cache) == sources.unpack_dir(dict(a), cache)
  assert os.path.dirname(sources.unpack_dir(a, cache)) == os.path.join(cache, "src")
