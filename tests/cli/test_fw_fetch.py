"""`hcq fw fetch`: the pinned firmware package into the cache, found afterwards without HCQ_FIRMWARE_DIR.

The end-to-end test serves a small .deb (built with dpkg-deb, holding one real firmware file) from a local HTTP server
and stands in for apt-get with a script that prints the --print-uris line apt would: nothing leaves the machine."""
import hashlib
import http.server
import os
import shutil
import subprocess
import threading

import pytest

from hcq import config as config_mod
from hcq.autogen import fwpackage, sources
from hcq.cli import main as hcq_main
from hcq.config import from_env


@pytest.fixture(scope="module")
def fw_dir():
  try: return fwpackage.firmware_dir(from_env().autogen_cache, log=lambda *a: None, progress=False)
  except sources.SourceError as e: pytest.skip(f"cannot fetch {fwpackage.PACKAGE['name']}: {e}")


@pytest.fixture
def no_system_firmware(monkeypatch, tmp_path):
  """The machine has no /lib/firmware/amdgpu (as on this project's CI machines), whatever this one has."""
  monkeypatch.setattr(config_mod, "SYSTEM_FIRMWARE_DIR", str(tmp_path / "no-system-firmware"))
  monkeypatch.delenv("HCQ_FIRMWARE_DIR", raising=False)


def _private(path):
  path.mkdir(mode=0o700, parents=True, exist_ok=True)
  return str(path)


def test_the_default_firmware_folder_is_the_fetched_one_when_the_machine_has_none(no_system_firmware, fw_dir, tmp_path):
  shared = from_env().autogen_cache
  got = from_env({"HCQ_AUTOGEN_CACHE": shared}).firmware_dir
  assert got == os.path.join(shared, "firmware", "amdgpu") and os.path.realpath(got) == os.path.realpath(fw_dir)
  empty = _private(tmp_path / "empty")
  # nothing fetched: the machine's folder all the same (the driver's error then names the fix)
  assert from_env({"HCQ_AUTOGEN_CACHE": empty}).firmware_dir == config_mod.SYSTEM_FIRMWARE_DIR
  assert from_env({"HCQ_AUTOGEN_CACHE": shared, "HCQ_FIRMWARE_DIR": "/srv/fw"}).firmware_dir == "/srv/fw"


def test_the_machines_own_firmware_folder_comes_first(monkeypatch, tmp_path, fw_dir):
  system = tmp_path / "lib-firmware-amdgpu"
  system.mkdir()
  monkeypatch.setattr(config_mod, "SYSTEM_FIRMWARE_DIR", str(system))
  assert from_env({"HCQ_AUTOGEN_CACHE": from_env().autogen_cache}).firmware_dir == str(system)


def test_mockpci_and_mockusb_boot_with_the_fetched_firmware_and_no_hcq_firmware_dir(no_system_firmware, fw_dir):
  import hcq
  cfg = from_env({"HCQ_AUTOGEN_CACHE": from_env().autogen_cache, "HCQ_TIMEOUT": "5"})
  for spec in ("MOCKPCI+AMD", "MOCKUSB+AMD"):
    with hcq.open(spec, config=cfg) as dev: assert dev.arch == "gfx1100", spec


def test_a_missing_firmware_file_names_the_command_that_fetches_it(no_system_firmware, monkeypatch, tmp_path, capsys):
  monkeypatch.setenv("HCQ_AUTOGEN_CACHE", _private(tmp_path / "empty"))
  assert hcq_main(["fw", "gc_11_0_0_mec.bin"]) == 1
  err = capsys.readouterr().err
  assert f"{config_mod.SYSTEM_FIRMWARE_DIR}/gc_11_0_0_mec.bin: no such firmware file" in err
  assert "run `hcq fw fetch` to download it" in err


class _Deb(http.server.BaseHTTPRequestHandler):
  body = b""

  def do_GET(self):
    self.send_response(200)
    self.send_header("Content-Length", str(len(self.body)))
    self.end_headers()
    self.wfile.write(self.body)

  def log_message(self, *a): pass


@pytest.mark.skipif(shutil.which("dpkg-deb") is None, reason="needs dpkg-deb (a Debian tool) to build the package")
def test_fw_fetch_downloads_checks_and_unpacks_then_hcq_fw_finds_the_file(no_system_firmware, fw_dir, monkeypatch,
                                                                           tmp_path, capsys):
  # a package like the pinned one: lib/firmware/amdgpu/gc_11_0_0_mec.bin
  root = tmp_path / "pkgroot"
  (root / "DEBIAN").mkdir(parents=True)
  (root / "DEBIAN" / "control").write_text("Package: hcq-test-fw\nVersion: 1.0\nArchitecture: all\n"
                                           "Maintainer: t <t@example.org>\nDescription: test\n")
  (root / "lib" / "firmware" / "amdgpu").mkdir(parents=True)
  shutil.copy(os.path.join(fw_dir, "gc_11_0_0_mec.bin"), root / "lib" / "firmware" / "amdgpu")
  deb = tmp_path / "hcq-test-fw_1.0_all.deb"
  subprocess.run(["dpkg-deb", "--root-owner-group", "--build", str(root), str(deb)], check=True, capture_output=True)
  _Deb.body = deb.read_bytes()
  sha = hashlib.sha256(_Deb.body).hexdigest()
  srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Deb)
  t = threading.Thread(target=srv.serve_forever, name="test-deb-server", daemon=True)
  t.start()
  try:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    url = f"http://127.0.0.1:{srv.server_address[1]}/pool/hcq-test-fw_1.0_all.deb"
    (bin_dir / "apt-get").write_text(f"#!/bin/sh\necho \"'{url}' {deb.name} {len(_Deb.body)} SHA256:{sha}\"\n")
    (bin_dir / "apt-get").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.setattr(sources, "APT_ARCHIVES", str(tmp_path / "no-archives"))
    monkeypatch.setattr(fwpackage, "PACKAGE", {"name": "hcq-test-fw", "version": "1.0", "arch": "all", "sha256": sha,
                                               "members": ["lib/firmware/amdgpu"]})
    cache = _private(tmp_path / "cache")
    monkeypatch.setenv("HCQ_AUTOGEN_CACHE", cache)
    assert hcq_main(["fw", "fetch"]) == 0
    out, err = capsys.readouterr()
    folder = out.strip()
    assert folder == os.path.join(sources.unpack_dir(fwpackage.PACKAGE, cache), "lib", "firmware", "amdgpu")
    assert os.listdir(folder) == ["gc_11_0_0_mec.bin"]
    # piped (pytest's capture is no terminal): plain progress lines, no bar redraws
    assert f"{deb.name}: downloading, " in err and "(100%)" in err and "\r" not in err
    assert os.path.realpath(from_env().firmware_dir) == os.path.realpath(folder)
    assert os.readlink(os.path.join(cache, "firmware")).startswith("src/hcq-test-fw_1.0-")
    assert hcq_main(["fw", "gc_11_0_0_mec.bin"]) == 0
    assert capsys.readouterr().out.startswith("gc_11_0_0_mec.bin: gfx container")
    # a second fetch finds the package unpacked and downloads nothing
    (bin_dir / "apt-get").write_text("#!/bin/sh\nexit 100\n")
    assert hcq_main(["fw", "fetch"]) == 0 and capsys.readouterr().out.strip() == folder
  finally:
    srv.shutdown()
    srv.server_close()
    t.join(timeout=5)


def test_a_package_whose_index_sha256_differs_from_the_pin_is_not_downloaded(monkeypatch, tmp_path):
  bin_dir = tmp_path / "bin"
  bin_dir.mkdir()
  (bin_dir / "apt-get").write_text("#!/bin/sh\necho \"'http://127.0.0.1:9/x.deb' x_1_all.deb 10 SHA256:" + "1" * 64 + "\"\n")
  (bin_dir / "apt-get").chmod(0o755)
  monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
  monkeypatch.setattr(sources, "APT_ARCHIVES", str(tmp_path / "no-archives"))
  pkg = {"name": "x", "version": "1", "arch": "all", "sha256": "0" * 64, "members": []}
  with pytest.raises(sources.SourceError, match="the archive's index gives sha256 1111.*not the manifest's 0000"):
    sources.fetch_deb(pkg, _private(tmp_path / "cache"), log=lambda *a: None)


def test_fw_fetch_takes_no_file(capsys):
  assert hcq_main(["fw", "fetch", "x.bin"]) == 2
  assert "hcq fw fetch takes no FILE" in capsys.readouterr().err
