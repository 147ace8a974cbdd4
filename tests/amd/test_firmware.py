"""`hcq fw` and drivers/amd/am/firmware.py on AMD's real firmware: every file of Debian's firmware-amd-graphics
20230210-5 (fetched once with apt-get download, sha256 pinned, cached), the gfx11 files checked field by field
against a C reader of the real amdgpu_ucode.h compiled by gcc, and corrupt or foreign files refused naming the file."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

import pytest

from hcq.autogen import fwpackage, generator, sources
from hcq.cli import main as hcq_main
from hcq.config import Config, from_env
from hcq.drivers.amd.am import firmware
from hcq.drivers.amd.am.firmware import FirmwareError

GFX11 = re.compile(r"^(gc_11_0_\d+_\w+|psp_13_0_\d+_\w+|smu_13_0_\d+|sdma_6_0_\d+)\.bin$")
# the struct Linux reads each gfx11 file as (amdgpu_ucode.h; by header major version where the files differ: the
# gc_11_0_1 CP files are gfx v1.0), written out here apart from the reader's tables so that a wrong choice there shows
GFX11_STRUCTS = [(r"gc_11_0_\d+_(me|mec|pfp)", {1: "gfx_firmware_header_v1_0", 2: "gfx_firmware_header_v2_0"}), (r"gc_11_0_\d+_rlc", "rlc_firmware_header_v2_3"),
                 (r"gc_11_0_\d+_mes1?", "mes_firmware_header_v1_0"), (r"gc_11_0_\d+_imu", "imu_firmware_header_v1_0"),
                 (r"psp_13_0_\d+_sos", "psp_firmware_header_v2_0"), (r"psp_13_0_\d+_ta", "ta_firmware_header_v2_0"),
                 (r"psp_13_0_\d+_(asd|toc)", "psp_firmware_header_v1_0"), (r"smu_13_0_\d+", "smc_firmware_header_v2_1"),
                 (r"sdma_6_0_\d+", "sdma_firmware_header_v2_0")]
DESC_ARRAYS = {"psp_firmware_header_v2_0": ("psp_fw_bin_count", "psp_fw_bin", "psp_fw_type"),
               "ta_firmware_header_v2_0": ("ta_fw_bin_count", "ta_fw_bin", "ta_fw_type")}


@pytest.fixture(scope="module")
def fw_dir():
  try: return fwpackage.firmware_dir(from_env().autogen_cache, log=lambda *a: None)
  except sources.SourceError as e:
    pytest.skip(f"cannot fetch {fwpackage.PACKAGE['name']}={fwpackage.PACKAGE['version']} "
                f"({fwpackage.PACKAGE['suite']} {fwpackage.PACKAGE['component']}): {e}")


def read(fw_dir, name) -> bytes:
  with open(os.path.join(fw_dir, name), "rb") as f: return f.read()


def fw(*argv, env_dir=None, monkeypatch=None):
  if env_dir is not None: monkeypatch.setenv("HCQ_FIRMWARE_DIR", env_dir)
  return hcq_main(["fw", *argv])


# ---- every file of the package

def test_every_file_of_the_package_reads_with_a_known_kind(fw_dir):
  names = sorted(os.listdir(fw_dir))
  assert len(names) == fwpackage.FILE_COUNT
  t0 = time.perf_counter()
  parsed = [firmware.parse(n, read(fw_dir, n)) for n in names]
  seconds = time.perf_counter() - t0
  print(f"{len(parsed)} firmware files read in {seconds:.3f} s")
  assert [p.file for p in parsed] == names
  assert all(p.kind for p in parsed), [p.file for p in parsed if not p.kind]
  assert all(p.common["size_bytes"] == len(p.data) for p in parsed)
  # the two rlc v2.1 files whose header_size_bytes (104) is the v2.0 size are read in full and say so
  assert sorted(p.file for p in parsed if p.notes) == ["raven2_rlc.bin", "vega20_rlc.bin"]


def test_the_cli_reads_every_file_of_the_package(fw_dir, capsys):
  names = sorted(os.listdir(fw_dir))
  assert hcq_main(["fw", "--json", *[os.path.join(fw_dir, n) for n in names]]) == 0
  out = json.loads(capsys.readouterr().out)
  assert [o["file"] for o in out] == names
  assert hcq_main(["fw", *[os.path.join(fw_dir, n) for n in names]]) == 0
  assert capsys.readouterr().out.count(" container, struct ") == len(names)


# ---- the gfx11 files against gcc's reading of the real amdgpu_ucode.h

def c_paths(cls, prefix=""):
  """(flat name, C member path) of a type-specific header's scalar and legacy-descriptor fields, the common header
  left out; nested version structs are walked (their member names are the header's)."""
  import ctypes
  from hcq.autogen.amd import ucode
  for name, ftype in cls._fields_:
    if ftype is ucode.struct_common_firmware_header: continue
    if isinstance(ftype, type) and issubclass(ftype, ctypes.Array):
      continue   # the flexible arrays: read as components
    if ftype is ucode.struct_psp_fw_legacy_bin_desc:
      for sub in ("fw_version", "offset_bytes", "size_bytes"): yield f"{name}.{sub}", f"{prefix}{name}.{sub}"
    elif isinstance(ftype, type) and issubclass(ftype, ctypes.Structure): yield from c_paths(ftype, f"{prefix}{name}.")
    else: yield name, prefix + name


def enum_names(header_text: str, enum: str) -> list[str]:
  body = re.search(r"enum\s+%s\s*\{(.*?)\}" % enum, header_text, re.S).group(1)
  return [n for n in re.findall(r"\b([A-Z][A-Z0-9_]+)\b", body) if not n.endswith("_MAX_INDEX")]


def c_reader(files: list[tuple[str, str]], header_text: str) -> str:
  """A C program that prints, for each (path, struct) given, the common header, the struct's fields, its
  psp_fw_bin_desc entries (with their enum names) and smc v2.1 pptable entries as `key value` lines."""
  from hcq.autogen.amd import ucode
  out = [r'''
#include <stdio.h>
#include <stdlib.h>
static unsigned char *slurp(const char *p) {
  FILE *f = fopen(p, "rb"); if (!f) { perror(p); exit(1); }
  fseek(f, 0, SEEK_END); long n = ftell(f); fseek(f, 0, SEEK_SET);
  unsigned char *b = malloc(n); if (fread(b, 1, n, f) != (size_t)n) exit(1); fclose(f); return b;
}''']
  for enum in ("psp_fw_type", "ta_fw_type"):
    out.append(f"static const char *{enum}_name(unsigned v) {{ switch (v) {{")
    out += [f'  case {n}: return "{n}";' for n in enum_names(header_text, enum)]
    out.append('  default: return "-"; } }')
  out.append("int main(void) { unsigned char *b;")
  for i, (path, struct) in enumerate(files):
    out.append(f'b = slurp("{path}"); {{ const struct common_firmware_header *c = (const void *)b;')
    out.append(f'printf("== {i}\\n");')
    for f in ("size_bytes", "header_size_bytes", "header_version_major", "header_version_minor", "ip_version_major",
              "ip_version_minor", "ucode_version", "ucode_size_bytes", "ucode_array_offset_bytes", "crc32"):
      out.append(f'printf("common.{f} %u\\n", (unsigned)c->{f});')
    out.append(f'const struct {struct} *h = (const void *)b;')
    for flat, path_ in c_paths(getattr(ucode, f"struct_{struct}")):
      out.append(f'printf("field.{flat} %u\\n", (unsigned)h->{path_});')
    if struct in DESC_ARRAYS:
      count, array, enum = DESC_ARRAYS[struct]
      out.append(f'for (unsigned i = 0; i < h->{count}; i++) printf("component %u %s %u %u %u\\n", h->{array}[i].fw_type, '
                 f'{enum}_name(h->{array}[i].fw_type), h->{array}[i].fw_version, h->{array}[i].offset_bytes, h->{array}[i].size_bytes);')
    if struct == "smc_firmware_header_v2_1":
      out.append('{ const struct smc_soft_pptable_entry *e = (const void *)(b + h->pptable_entry_offset);')
      out.append('  for (unsigned i = 0; i < h->pptable_count; i++) printf("pptable %u %u %u\\n", e[i].id, '
                 'e[i].ppt_offset_bytes, e[i].ppt_size_bytes); }')
    out.append("free(b); }")
  out.append("return 0; }")
  return "\n".join(out) + "\n"


def as_lines(obj: dict) -> list[str]:
  """The reader's JSON object as the C program's lines."""
  lines = [f"common.{k} {obj[k]}" for k in ("size_bytes", "header_size_bytes")]
  lines += [f"common.header_version_major {obj['header_version'][0]}", f"common.header_version_minor {obj['header_version'][1]}",
            f"common.ip_version_major {obj['ip_version'][0]}", f"common.ip_version_minor {obj['ip_version'][1]}"]
  lines += [f"common.{k} {obj[k]}" for k in ("ucode_version", "ucode_size_bytes", "ucode_array_offset_bytes", "crc32")]
  for k, v in obj["fields"].items():
    if k == "pptables": continue
    if isinstance(v, dict): lines += [f"field.{k}.{s} {x}" for s, x in v.items()]
    else: lines.append(f"field.{k} {v}")
  lines += [f"component {c['type']} {c['name'] or '-'} {c['version']} {c['offset']} {c['size']}" for c in obj["components"]]
  lines += [f"pptable {t['id']} {t['ppt_offset_bytes']} {t['ppt_size_bytes']}" for t in obj["fields"].get("pptables", [])]
  return lines


@pytest.mark.tools("gcc")
def test_gfx11_files_agree_with_a_gcc_compiled_reader_of_amdgpu_ucode_h(fw_dir, tmp_path, capsys):
  names = sorted(n for n in os.listdir(fw_dir) if GFX11.match(n))
  assert len(names) == 38, names   # gc_11_0_{0,1,2} x 7, psp_13_0_* x 13, smu_13_0_{0,7}, sdma_6_0_{0,1,2}
  files = []
  for n in names:
    struct = next(s for pat, s in GFX11_STRUCTS if re.fullmatch(pat, n[:-4]))
    if isinstance(struct, dict): struct = struct[int.from_bytes(read(fw_dir, n)[8:10], "little")]
    files.append((os.path.join(fw_dir, n), struct))
  manifest = generator.load_manifest()
  spec = manifest["modules"]["amd.ucode"]
  roots = generator.Roots(manifest, from_env().autogen_cache, lambda *a: None)
  header = roots.path(spec["headers"][0])
  incs = [roots.path(i) for i in spec["include"]]
  src = tmp_path / "reader.c"
  src.write_text(spec.get("prelude", "") + f'#include "{header}"\n' + c_reader(files, open(header).read()))
  flags = ["-std=gnu11", "-w", *[f"-I{d}" for d in incs], *[f"-D{k}={v}" for k, v in spec.get("defines", {}).items()]]
  subprocess.run(["gcc", *flags, str(src), "-o", str(tmp_path / "reader")], check=True)
  text = subprocess.run([str(tmp_path / "reader")], capture_output=True, text=True, check=True).stdout
  want = [block.strip().splitlines()[1:] for block in text.split("== ")[1:]]

  assert hcq_main(["fw", "--json", *[p for p, _ in files]]) == 0
  got = json.loads(capsys.readouterr().out)
  assert len(got) == len(want) == len(files)
  checked = 0
  for (path, struct), obj, lines in zip(files, got, want):
    assert obj["struct"] == struct, path
    assert as_lines(obj) == lines, path
    checked += len(lines)
  print(f"{len(files)} gfx11 files, {checked} values equal to gcc's reading of amdgpu_ucode.h")
  sos = next(o for o in got if o["file"] == "psp_13_0_0_sos.bin")
  assert len(sos["components"]) == 6


# ---- PSP v2 components

def test_the_components_of_psp_13_0_0_sos_are_listed_with_their_names(fw_dir, capsys):
  assert hcq_main(["fw", "--json", os.path.join(fw_dir, "psp_13_0_0_sos.bin")]) == 0
  (obj,) = json.loads(capsys.readouterr().out)
  assert obj["struct"] == "psp_firmware_header_v2_0" and obj["header_version"] == [2, 0]
  assert [(c["type"], c["name"]) for c in obj["components"]] == [
    (2, "PSP_FW_TYPE_PSP_SYS_DRV"), (1, "PSP_FW_TYPE_PSP_SOS"), (4, "PSP_FW_TYPE_PSP_TOC"),
    (3, "PSP_FW_TYPE_PSP_KDB"), (5, "PSP_FW_TYPE_PSP_SPL"), (6, "PSP_FW_TYPE_PSP_RL")]
  # the components tile the ucode array, in file order
  ends = [c["offset"] + c["size"] for c in obj["components"]]
  assert [c["offset"] for c in obj["components"]] == [0] + ends[:-1] and ends[-1] <= obj["ucode_size_bytes"]
  assert hcq_main(["fw", os.path.join(fw_dir, "psp_13_0_0_sos.bin")]) == 0
  assert re.search(r"^\s+1\s+PSP_FW_TYPE_PSP_SOS\s+0x00310025\s+157584\s+99200$", capsys.readouterr().out, re.M)


def test_a_ta_v2_container_names_its_components_by_the_ta_enum(fw_dir):
  obj = firmware.parse("psp_13_0_0_ta.bin", read(fw_dir, "psp_13_0_0_ta.bin")).as_json()
  assert [c["name"] for c in obj["components"]] == ["TA_FW_TYPE_PSP_ASD", "TA_FW_TYPE_PSP_HDCP", "TA_FW_TYPE_PSP_DTM",
                                                    "TA_FW_TYPE_PSP_RAS"]


# ---- corrupt files: a FirmwareError naming the file and the field

def put32(data: bytes, offset: int, value: int) -> bytes:
  return data[:offset] + value.to_bytes(4, "little") + data[offset + 4:]


def flip(data: bytes, offset: int, mask: int = 0x40) -> bytes:
  return data[:offset] + bytes([data[offset] ^ mask]) + data[offset + 1:]


def test_a_truncated_sos_is_refused_naming_the_file(fw_dir):
  data = read(fw_dir, "psp_13_0_0_sos.bin")
  for cut in (len(data) - 1, 1000, 40, 31, 0):
    with pytest.raises(FirmwareError, match=r"^psp_13_0_0_sos\.bin: .*(size_bytes|common header)"):
      firmware.parse("psp_13_0_0_sos.bin", data[:cut])
  # truncated with its size_bytes rewritten to match: the ucode array no longer fits
  short = put32(data[:100_000], 0, 100_000)
  with pytest.raises(FirmwareError, match=r"^psp_13_0_0_sos\.bin: ucode_array_offset_bytes/ucode_size_bytes: "):
    firmware.parse("psp_13_0_0_sos.bin", short)


# (file, byte offset to flip, what the error names). Offsets: common header 0 size_bytes, 4 header_size_bytes,
# 8 header_version_major, 20 ucode_size_bytes; psp v2.0: 32 psp_fw_bin_count, 36 + 16 i the descriptors (+12
# size_bytes); gfx v2.0: 36 ucode_size_bytes; smc v2.1: 36 pptable_count; rlc v2.3: 196 rlcv_ucode_size_bytes;
# psp v1.1: 44 the toc descriptor (+8 size_bytes)
FLIPS = [("psp_13_0_0_sos.bin", 0, "size_bytes says"), ("psp_13_0_0_sos.bin", 3, "size_bytes says"),
         ("psp_13_0_0_sos.bin", 7, "header_size_bytes"), ("psp_13_0_0_sos.bin", 8, r"header version 66\.0 is not one"),
         ("psp_13_0_0_sos.bin", 22, "ucode_array_offset_bytes/ucode_size_bytes"),
         ("psp_13_0_0_sos.bin", 34, r"psp_fw_bin_count \(4194310 psp_fw_bin_desc"),
         ("psp_13_0_0_sos.bin", 36 + 16 + 12 + 2, r"psp_fw_bin\[1\]\.offset_bytes/size_bytes"),
         ("gc_11_0_0_mec.bin", 36 + 2, "ucode_offset_bytes/ucode_size_bytes"),
         ("smu_13_0_0.bin", 36 + 1, "pptable_entry_offset/pptable_count"),
         ("gc_11_0_0_rlc.bin", 196 + 2, "rlcv_ucode_offset_bytes/rlcv_ucode_size_bytes"),
         ("navi10_sos.bin", 32 + 12 + 8 + 2, r"toc\.offset_bytes/size_bytes")]


@pytest.mark.parametrize("name,offset,names", FLIPS, ids=[f"{n}@{o}" for n, o, _ in FLIPS])
def test_a_flipped_header_byte_is_detected_naming_the_file_and_field(fw_dir, name, offset, names):
  data = read(fw_dir, name)
  firmware.parse(name, data)
  with pytest.raises(FirmwareError, match=rf"^{re.escape(name)}: .*{names}"):
    firmware.parse(name, flip(data, offset))


def test_an_unknown_header_version_for_the_kind_is_refused(fw_dir):
  data = read(fw_dir, "gc_11_0_0_mec.bin")
  bad = data[:8] + (3).to_bytes(2, "little") + data[10:]
  with pytest.raises(FirmwareError, match=r"^gc_11_0_0_mec\.bin: header version 3\.0 is not one amdgpu_ucode\.h "
                                          r"defines for a gfx container \(1\.0, 2\.0\); the kind comes from the file name"):
    firmware.parse("gc_11_0_0_mec.bin", bad)


# ---- the command line: foreign files, missing files, usage

def test_files_that_are_not_firmware_containers_are_refused_with_exit_1(fw_dir, tmp_path, capsys):
  host = tmp_path / "hostname"
  host.write_text("myhost\n")
  text = tmp_path / "notes.txt"
  text.write_text("x" * 4096)
  elf = os.path.realpath(sys.executable)
  for path in (str(host), str(text), elf, str(tmp_path)):
    assert hcq_main(["fw", path]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"hcq fw: error: {path}") and "Traceback" not in err, err
  # the good file of a list is still printed; the status says one failed
  assert hcq_main(["fw", "--json", elf, os.path.join(fw_dir, "gc_11_0_0_me.bin")]) == 1
  out = capsys.readouterr()
  assert [o["file"] for o in json.loads(out.out)] == ["gc_11_0_0_me.bin"] and elf in out.err


def test_a_bare_name_is_read_from_hcq_firmware_dir_and_a_missing_one_names_the_package(fw_dir, monkeypatch, capsys,
                                                                                          tmp_path):
  monkeypatch.chdir(tmp_path)
  monkeypatch.setenv("HCQ_FIRMWARE_DIR", fw_dir)
  assert hcq_main(["fw", "--json", "sdma_6_0_0.bin"]) == 0
  assert json.loads(capsys.readouterr().out)[0]["struct"] == "sdma_firmware_header_v2_0"
  assert hcq_main(["fw", "gc_99_0_0_me.bin"]) == 1
  err = capsys.readouterr().err
  assert os.path.join(fw_dir, "gc_99_0_0_me.bin") in err and "firmware-amd-graphics" in err


def test_usage_errors_exit_2(capsys):
  assert hcq_main(["fw"]) == 2
  assert hcq_main(["fw", "--bogus", "x.bin"]) == 2


def test_load_reads_through_the_os_interface_and_names_the_package_when_missing(fw_dir, tmp_path):
  from hcq.drivers.system import LinuxOS
  osi = LinuxOS(Config())
  assert firmware.load(osi, fw_dir, "gc_11_0_0_imu.bin").struct == "imu_firmware_header_v1_0"
  with pytest.raises(FirmwareError, match=r"gc_11_0_0_imu\.bin: no such firmware file .*firmware-amd-graphics"):
    firmware.load(osi, str(tmp_path), "gc_11_0_0_imu.bin")


def test_hcq_firmware_dir_is_read_by_config(tmp_path):
  empty = tmp_path / "cache"
  empty.mkdir(mode=0o700)
  if not os.path.isdir("/lib/firmware/amdgpu"):   # else the machine's own folder (tests/cli/test_fw_fetch.py)
    assert from_env({"HCQ_AUTOGEN_CACHE": str(empty)}).firmware_dir == "/lib/firmware/amdgpu"
  assert from_env({"HCQ_FIRMWARE_DIR": "/srv/fw"}).firmware_dir == "/srv/fw"


def test_an_unrecognized_name_reads_only_the_common_header_and_says_so(fw_dir):
  f = firmware.parse("mystery.bin", read(fw_dir, "gc_11_0_0_mec.bin"))
  assert (f.kind, f.struct, f.fields) == (None, "common_firmware_header", {})
  assert "not recognized" in f.kind_from


# ---- the private apt sources list the package is fetched through

def test_the_private_sources_list_comes_from_the_machines_debian_entry(tmp_path, monkeypatch):
  etc = tmp_path / "etc"
  (etc / "sources.list.d").mkdir(parents=True)
  (etc / "sources.list.d" / "debian.sources").write_text(
    "Types: deb\n# a comment\nURIs: http://mirror.example/debian\nSuites: bookworm bookworm-updates\n"
    "Components: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\n"
    "Types: deb\nURIs: http://mirror.example/debian-security\nSuites: bookworm-security\nComponents: main\n")
  calls = []
  monkeypatch.setattr(sources, "_apt", lambda argv, cwd, what: calls.append(argv))
  cache = tmp_path / "cache"
  opts = sources.private_apt_options(fwpackage.PACKAGE, str(cache), sources_dir=str(etc))
  listfile = opts[opts.index("-o") + 1].split("=", 1)[1]
  assert open(listfile).read() == ("deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] "
                                   "http://mirror.example/debian bookworm non-free-firmware\n")
  assert "Dir::Etc::sourceparts=/dev/null" in opts and calls and calls[0][-1] == "update"
  # a legacy sources.list when there is no deb822 file
  os.unlink(etc / "sources.list.d" / "debian.sources")
  (etc / "sources.list").write_text("# x\ndeb-src http://src.example/debian bookworm main\n"
                                    "deb [arch=amd64 signed-by=/k.gpg] http://legacy.example/debian bookworm main\n")
  assert sources.debian_mirror(str(etc)) == ("http://legacy.example/debian", "/k.gpg")
  os.unlink(etc / "sources.list")
  with pytest.raises(sources.SourceError, match="no Debian archive entry"):
    sources.debian_mirror(str(etc))


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path, capsys):
  """`hcq fw FIFO` used to block in open() until a writer came; it is refused at once, and so is one found by load()."""
  import os
  import time
  from hcq.cli import main
  from hcq.config import Config
  from hcq.drivers.amd.am import firmware
  from hcq.drivers.system import LinuxOS
  fifo = tmp_path / "gc_11_0_0_mec.bin"
  os.mkfifo(fifo)
  assert main(["fw", str(fifo)]) == 1       # an open of the FIFO would block here: the test would not end
  assert "not a regular file" in capsys.readouterr().err
  with pytest.raises(firmware.FirmwareError, match="not a regular file"):
    firmware.load(LinuxOS(Config()), str(tmp_path), fifo.name)


def test_a_firmware_folder_or_file_any_user_may_write_is_refused(fw_dir, tmp_path):
  """issue 29 item 14: the cache folder was refused when others may write to it, the firmware folder (whose files the
  GPU is given) was not. Both: a folder or file with o+w is named, its mode given, and not used."""
  from hcq.drivers.system import LinuxOS
  osi = LinuxOS(Config())
  folder = tmp_path / "fw"
  folder.mkdir()
  (folder / "gc_11_0_0_imu.bin").write_bytes(open(os.path.join(fw_dir, "gc_11_0_0_imu.bin"), "rb").read())
  os.chmod(folder, 0o755)
  os.chmod(folder / "gc_11_0_0_imu.bin", 0o644)
  assert firmware.load(osi, str(folder), "gc_11_0_0_imu.bin").struct == "imu_firmware_header_v1_0"
  os.chmod(folder, 0o1777)      # sticky, as /tmp: anyone may still create a name in it
  with pytest.raises(FirmwareError, match=rf"{re.escape(str(folder))}: the firmware folder is writable by every user \(mode 1777\)"):
    firmware.load(osi, str(folder), "gc_11_0_0_imu.bin")
  os.chmod(folder, 0o755)
  os.chmod(folder / "gc_11_0_0_imu.bin", 0o666)
  with pytest.raises(FirmwareError, match=r"gc_11_0_0_imu\.bin: the firmware file is writable by every user \(mode 666\)"):
    firmware.load(osi, str(folder), "gc_11_0_0_imu.bin")


def test_mockpci_refuses_a_world_writable_firmware_folder(fw_dir, tmp_path):
  """The mock shows the host folder's mode, so the driver's check meets it on MOCKPCI+AMD as on a machine."""
  import hcq
  folder = tmp_path / "fw"
  folder.mkdir()
  for name in os.listdir(fw_dir): os.symlink(os.path.join(fw_dir, name), folder / name)
  os.chmod(folder, 0o777)
  with pytest.raises(hcq.DeviceError, match=r"fw: the firmware folder is writable by every user \(mode 777\)"):
    hcq.open("MOCKPCI+AMD", config=Config(timeout_s=5, firmware_dir=str(folder), lock_dir=str(tmp_path)))
