"""autogen/download.py: resumable (HTTP Range), sha256-checked downloads with byte progress, against a local server."""
import hashlib
import http.server
import io
import os
import threading

import pytest

from hcq.autogen import download, sources

BODY = bytes(range(256)) * 4096    # 1 MiB
SHA = hashlib.sha256(BODY).hexdigest()


class _Handler(http.server.BaseHTTPRequestHandler):
  ranges = True      # the server honours Range requests (206), else it answers the whole file (200)
  seen: list = []

  def do_GET(self):
    rng = self.headers.get("Range")
    type(self).seen.append(rng)
    if self.path != "/pkg.deb":
      self.send_error(404)
      return
    start = int(rng.split("=")[1].rstrip("-")) if rng and type(self).ranges else 0
    body = BODY[start:]
    self.send_response(206 if start else 200)
    if start: self.send_header("Content-Range", f"bytes {start}-{len(BODY) - 1}/{len(BODY)}")
    self.send_header("Content-Length", str(len(body)))
    self.end_headers()
    self.wfile.write(body)

  def log_message(self, *a): pass


@pytest.fixture
def server():
  _Handler.seen = []
  _Handler.ranges = True
  srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
  t = threading.Thread(target=srv.serve_forever, name="test-http", daemon=True)
  t.start()
  yield f"http://127.0.0.1:{srv.server_address[1]}", _Handler
  srv.shutdown()
  srv.server_close()
  t.join(timeout=5)


class _Tty(io.StringIO):
  def isatty(self): return True


def test_a_download_is_checked_and_shows_plain_lines_when_piped(tmp_path, server):
  url, _ = server
  out = io.StringIO()
  dest = download.fetch(f"{url}/pkg.deb", str(tmp_path / "pkg.deb"), len(BODY), SHA, out=out)
  assert open(dest, "rb").read() == BODY and not os.path.exists(dest + ".part")
  lines = out.getvalue().splitlines()
  assert lines[0] == "pkg.deb: starting, 0 B of 1.0 MiB (0%)"
  assert lines[-1] == "pkg.deb: downloading, 1.0 MiB of 1.0 MiB (100%)"
  assert "\r" not in out.getvalue() and 5 <= len(lines) <= 12   # one line per tenth, no bar redraws


def test_a_terminal_gets_a_tqdm_byte_bar(tmp_path, server):
  url, _ = server
  out = _Tty()
  download.fetch(f"{url}/pkg.deb", str(tmp_path / "pkg.deb"), len(BODY), SHA, out=out)
  text = out.getvalue()
  assert "\r" in text and "100%" in text and "1.00M/1.00M" in text   # tqdm's redraws and its byte counts


def test_a_partial_download_is_resumed_with_a_range_request(tmp_path, server):
  url, handler = server
  (tmp_path / "pkg.deb.part").write_bytes(BODY[:300_000])
  out = io.StringIO()
  download.fetch(f"{url}/pkg.deb", str(tmp_path / "pkg.deb"), len(BODY), SHA, out=out)
  assert handler.seen == ["bytes=300000-"]
  assert (tmp_path / "pkg.deb").read_bytes() == BODY
  assert out.getvalue().startswith("pkg.deb: resuming, 293.0 KiB of 1.0 MiB (28%)")


def test_a_server_that_ignores_range_is_read_from_the_start(tmp_path, server):
  url, handler = server
  handler.ranges = False
  (tmp_path / "pkg.deb.part").write_bytes(BODY[:300_000])
  out = io.StringIO()
  download.fetch(f"{url}/pkg.deb", str(tmp_path / "pkg.deb"), len(BODY), SHA, out=out)
  assert (tmp_path / "pkg.deb").read_bytes() == BODY
  assert "the server does not resume; starting again" in out.getvalue()


def test_a_wrong_sha256_removes_the_download_and_names_the_url(tmp_path, server):
  url, _ = server
  with pytest.raises(download.DownloadError, match=r"pkg.deb: sha256 [0-9a-f]{64} does not match the pinned 0000"):
    download.fetch(f"{url}/pkg.deb", str(tmp_path / "pkg.deb"), len(BODY), "0" * 64, quiet=True)
  assert os.listdir(tmp_path) == []


def test_a_missing_file_is_an_error_naming_the_url_and_status(tmp_path, server):
  url, _ = server
  with pytest.raises(download.DownloadError, match=r"/nope.deb: HTTP 404"):
    download.fetch(f"{url}/nope.deb", str(tmp_path / "nope.deb"), 10, SHA, quiet=True)


def test_a_partial_file_that_is_a_symlink_is_never_followed(tmp_path, server):
  url, _ = server
  victim = tmp_path / "victim"
  victim.write_bytes(b"keep")
  (tmp_path / "pkg.deb.part").symlink_to(victim)
  download.fetch(f"{url}/pkg.deb", str(tmp_path / "pkg.deb"), len(BODY), SHA, quiet=True)
  assert victim.read_bytes() == b"keep" and (tmp_path / "pkg.deb").read_bytes() == BODY


def test_apts_print_uris_line_is_read():
  listing = ("'http://mirror.example/debian/pool/f/x_1_all.deb' x_1_all.deb 11866996 SHA256:" + "ab" * 32 + "\n")
  assert sources._print_uri(listing, "x_1_all.deb", "what") == ("http://mirror.example/debian/pool/f/x_1_all.deb",
                                                               11866996, "ab" * 32)
  with pytest.raises(sources.SourceError, match="what: apt does not list y.deb"):
    sources._print_uri(listing, "y.deb", "what")
