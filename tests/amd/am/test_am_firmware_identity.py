"""A firmware file must be what its name says, and an image what AMD signed (issue #15): the driver checks each
container's header (ip_version against the discovery table, the header struct) before cutting images from it; the
mock PSP refuses any image whose SHA-256 is not that of an image AMD released as that firmware type (its stand-in for
signature verification); firmware.load names a firmware folder that is not a folder and a name that is not a
regular file, before anything is read."""
import errno
import importlib.util
import os as _os
import pathlib
import struct

import pytest

from hcq.cli import main as hcq_main
from hcq.config import Config
from hcq.drivers.amd.am import firmware
from hcq.drivers.amd.am.device import AMDev
from hcq.drivers.amd.am.psp import PSPError
from hcq.drivers.system.linux import LinuxOS
from hcq.errors import DeviceError
from hcq.mockgpu.amd.am import fwdigests

ADDR = "0000:03:00.0"
ROOT = pathlib.Path(__file__).resolve().parents[3]
NAVI31 = ["psp_13_0_0_sos.bin", "psp_13_0_0_ta.bin", "smu_13_0_0.bin", "sdma_6_0_0.bin",
          *(f"gc_11_0_0_{b}.bin" for b in ("imu", "me", "mec", "mes", "mes1", "pfp", "rlc"))]


def read_fw(fw_dir, name):
  with open(_os.path.join(fw_dir, name), "rb") as f: return bytearray(f.read())


def replace_file(navi_fw, name, data):
  os, _ = navi_fw
  os.vfs.add_file(_os.path.join(os.config.firmware_dir, name), bytes(data), replace=True)


def boot(navi_fw):
  os, _ = navi_fw
  return AMDev(os, ADDR, os.config)


# ---- the driver: a container is what its name says
@pytest.mark.parametrize("target, source, message", [
  # the audit's case: the MEC under the SMU's name was loaded as the SMU firmware
  ("smu_13_0_0.bin", "gc_11_0_0_mec.bin",
   r"smu_13_0_0.bin: ip_version 11\.0, but the file is loaded for MP1 13\.0\.0 \(expected ip_version 13\.0\)"),
  ("gc_11_0_0_me.bin", "sdma_6_0_0.bin",
   r"gc_11_0_0_me.bin: ip_version 6\.0, but the file is loaded for GC 11\.0\.0 \(expected ip_version 11\.0\)"),
  ("sdma_6_0_0.bin", "psp_13_0_0_sos.bin",
   r"sdma_6_0_0.bin: ip_version 13\.0, but the file is loaded for SDMA0 6\.0\.0 \(expected ip_version 6\.0\)"),
  ("psp_13_0_0_sos.bin", "gc_11_0_0_imu.bin",
   r"psp_13_0_0_sos.bin: ip_version 11\.0, but the file is loaded for MP0 13\.0\.0 \(expected ip_version 13\.0\)"),
  # the right IP, the wrong header: the IMU under the RLC's name; gc_11_0_1's MEC is not RS64 (gfx v2.0)
  ("gc_11_0_0_rlc.bin", "gc_11_0_0_imu.bin",
   r"gc_11_0_0_rlc.bin: header version 1\.0 makes it a rlc_firmware_header_v1_0, but a gc_11_0_0_rlc file for GC "
   r"11\.0\.0 has a rlc_firmware_header_v2_3 or rlc_firmware_header_v2_4"),
  ("gc_11_0_0_mec.bin", "gc_11_0_1_mec.bin",
   r"gc_11_0_0_mec.bin: header version 1\.0 makes it a gfx_firmware_header_v1_0, but a gc_11_0_0_mec file for GC "
   r"11\.0\.0 has a gfx_firmware_header_v2_0"),
])
def test_a_file_of_another_ip_under_a_name_is_refused_naming_field_and_expectation(navi_fw, fw_dir, target, source, message):
  replace_file(navi_fw, target, read_fw(fw_dir, source))
  with pytest.raises(DeviceError, match=message):
    boot(navi_fw)
  assert navi_fw[1].psp.loaded_fw == []         # refused before the PSP saw any image


def test_every_navi31_file_of_the_package_passes_the_identity_check(navi_fw):
  with boot(navi_fw) as d:
    assert d.stage == "gfx" and navi_fw[1].psp.refused == []


# ---- the mock PSP: only images AMD signed, each as its own type
def _image_at(fw, what):
  """File offset of the start of the signed image `what` of fw: a PSP component name, or "ucode"."""
  base = fw.common["ucode_array_offset_bytes"]
  if what == "ucode": return base
  return base + next(c["offset"] for c in fw.components if c["name"] == what)


def test_the_mec_file_holding_the_me_is_refused_by_the_psp_naming_the_file(navi_fw, fw_dir):
  """The ME container passes every header check a MEC passes (same IP, same header): only the signature tells."""
  replace_file(navi_fw, "gc_11_0_0_mec.bin", read_fw(fw_dir, "gc_11_0_0_me.bin"))
  with pytest.raises(PSPError, match=r"PSP refused LOAD_IP_FW RS64_MEC from gc_11_0_0_mec.bin: status 0xffff0005"):
    boot(navi_fw)
  refused = navi_fw[1].psp.refused
  assert len(refused) == 1 and "signature check failed" in refused[0] and "RS64_MEC image AMD signed" in refused[0]


@pytest.mark.parametrize("where, component", [("file offset 300 (the SYS_DRV header)", "SYS_DRV"), ("SOS body", "SOS"),
                                              ("KDB body", "KDB"), ("SOS signature", "SOS")])
def test_a_flipped_byte_in_an_sos_component_stops_the_bootloader(navi_fw, fw_dir, where, component):
  data = read_fw(fw_dir, "psp_13_0_0_sos.bin")
  fw = firmware.parse("psp_13_0_0_sos.bin", bytes(data))
  comp = {c["name"]: c for c in fw.components}
  sos = _image_at(fw, "PSP_FW_TYPE_PSP_SOS")
  sos_body = struct.unpack_from("<I", data, sos + 0x14)[0]
  at = {"file offset 300 (the SYS_DRV header)": 300, "SOS body": sos + 256 + sos_body // 2,
        "KDB body": _image_at(fw, "PSP_FW_TYPE_PSP_KDB") + comp["PSP_FW_TYPE_PSP_KDB"]["size"] // 2,
        "SOS signature": sos + 256 + sos_body + 100}[where]
  data[at] ^= 0x01
  replace_file(navi_fw, "psp_13_0_0_sos.bin", data)
  with pytest.raises(PSPError, match=rf"the PSP bootloader refused the {component} component of psp_13_0_0_sos.bin .*: status 0x0005"):
    boot(navi_fw)
  refused = navi_fw[1].psp.refused
  assert len(refused) == 1 and refused[0].startswith(f"bootloader {component}: signature check failed"), refused


def test_a_flipped_byte_in_the_toc_is_refused_by_load_toc(navi_fw, fw_dir):
  data = read_fw(fw_dir, "psp_13_0_0_sos.bin")
  fw = firmware.parse("psp_13_0_0_sos.bin", bytes(data))
  data[_image_at(fw, "PSP_FW_TYPE_PSP_TOC") + 600] ^= 0x80
  replace_file(navi_fw, "psp_13_0_0_sos.bin", data)
  with pytest.raises(PSPError, match=r"PSP refused LOAD_TOC \(psp_13_0_0_sos.bin TOC\): status 0xffff0005"):
    boot(navi_fw)


@pytest.mark.parametrize("name, fw_type, offset", [
  ("smu_13_0_0.bin", "SMU", 0x30),                    # a header byte that is neither the magic nor the size
  ("smu_13_0_0.bin", "SMU", 100000),                  # the body
  ("sdma_6_0_0.bin", "SDMA_UCODE_TH0", 1000),
  ("gc_11_0_0_imu.bin", "IMU_I", 2000),
])
def test_a_flipped_byte_in_an_ip_image_is_refused_naming_the_file(navi_fw, fw_dir, name, fw_type, offset):
  data = read_fw(fw_dir, name)
  data[firmware.parse(name, bytes(data)).common["ucode_array_offset_bytes"] + offset] ^= 0x01
  replace_file(navi_fw, name, data)
  with pytest.raises(PSPError, match=rf"PSP refused LOAD_IP_FW {fw_type} from {name}: status 0xffff0005"):
    boot(navi_fw)
  assert "signature check failed" in navi_fw[1].psp.refused[0]


def test_a_truncated_image_that_is_still_well_formed_is_refused(navi_fw, fw_dir):
  """The SMU image's header says its body is 256 bytes shorter: header, body and 'signature' are all there (the
  well-formedness checks pass), but it is not the image AMD signed."""
  data = read_fw(fw_dir, "smu_13_0_0.bin")
  at = firmware.parse("smu_13_0_0.bin", bytes(data)).common["ucode_array_offset_bytes"]
  body = struct.unpack_from("<I", data, at + 0x14)[0]
  struct.pack_into("<I", data, at + 0x14, body - 256)
  replace_file(navi_fw, "smu_13_0_0.bin", data)
  with pytest.raises(PSPError, match=r"PSP refused LOAD_IP_FW SMU from smu_13_0_0.bin: status 0xffff0005"):
    boot(navi_fw)
  assert "signature check failed" in navi_fw[1].psp.refused[0]


def test_the_digest_table_names_the_pinned_package():
  from hcq.autogen import fwpackage
  assert fwdigests.PACKAGE == f"{fwpackage.PACKAGE['name']} {fwpackage.PACKAGE['version']}"
  assert fwdigests.__doc__ and "scripts/gen_psp_digests.py" in fwdigests.__doc__
  assert {"KDB", "SPL", "SYS_DRV", "SOS", "TOC", "SMU", "RS64_MEC", "SDMA_UCODE_TH1"} <= set(fwdigests.DIGESTS)


def test_the_digest_table_is_what_the_script_computes_from_the_package(fw_dir):
  spec = importlib.util.spec_from_file_location("gen_psp_digests", ROOT / "scripts" / "gen_psp_digests.py")
  gen = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(gen)
  with open(fwdigests.__file__) as f: assert f.read() == gen.render(gen.compute(fw_dir))


# ---- firmware.load: what is at the path, said before anything is read
class RecordingOS(LinuxOS):
  """LinuxOS that records every open: a check that refuses a path must come before it is opened."""

  def __init__(self):
    super().__init__(Config())
    self.opened = []

  def open(self, path, flags=_os.O_RDWR, mode=0o666):
    self.opened.append(path)
    return super().open(path, flags, mode)


@pytest.fixture
def fw_links(fw_dir, tmp_path):
  """A firmware folder of links to the pinned package's Navi 31 files (a test replaces some)."""
  d = tmp_path / "amdgpu"
  d.mkdir()
  for name in NAVI31: (d / name).symlink_to(_os.path.join(fw_dir, name))
  return d


def _replace_with(folder, name, kind):
  path = folder / name
  path.unlink()
  if kind == "folder": path.mkdir()
  elif kind == "link to /dev/zero": path.symlink_to("/dev/zero")
  elif kind == "FIFO": _os.mkfifo(path)
  return path


@pytest.mark.parametrize("kind, message", [
  ("folder", "a folder, not a firmware file"),
  ("link to /dev/zero", "a character device, not a regular file, so not a firmware container"),
  ("FIFO", "a FIFO, not a regular file, so not a firmware container"),
])
def test_a_name_that_is_not_a_regular_file_is_named_and_never_opened(fw_links, kind, message):
  path = _replace_with(fw_links, "smu_13_0_0.bin", kind)
  os = RecordingOS()
  with pytest.raises(firmware.FirmwareError, match=f"^{path}: {message}"):
    firmware.load(os, str(fw_links), "smu_13_0_0.bin")
  assert os.opened == []
  assert firmware.load(os, str(fw_links), "sdma_6_0_0.bin").struct == "sdma_firmware_header_v2_0"


def test_a_firmware_folder_that_is_a_file_or_missing_is_named_as_such(tmp_path):
  os = RecordingOS()
  with pytest.raises(firmware.FirmwareError, match=r"^/etc/passwd: a regular file, not a folder \(the firmware folder"):
    firmware.load(os, "/etc/passwd", "psp_13_0_0_sos.bin")
  with pytest.raises(firmware.FirmwareError, match=rf"^{tmp_path}/none: the firmware folder does not exist"):
    firmware.load(os, str(tmp_path / "none"), "psp_13_0_0_sos.bin")
  assert os.opened == []


def test_an_unreadable_firmware_file_is_named_with_the_reason(fw_links, monkeypatch):
  real = LinuxOS.open

  def refuse(self, path, flags=_os.O_RDWR, mode=0o666):
    from hcq.errors import OSCallError
    if path.endswith("smu_13_0_0.bin"): raise OSCallError("open", path, errno.EACCES)
    return real(self, path, flags, mode)
  monkeypatch.setattr(LinuxOS, "open", refuse)
  with pytest.raises(firmware.FirmwareError, match=r"cannot read .*smu_13_0_0.bin: Permission denied"):
    firmware.load(LinuxOS(Config()), str(fw_links), "smu_13_0_0.bin")


@pytest.mark.parametrize("kind, message", [
  ("folder is a file", "{d}: a regular file, not a folder (the firmware folder, HCQ_FIRMWARE_DIR"),
  ("folder", "{d}/gc_11_0_0_mec.bin: a folder, not a firmware file"),
  ("link to /dev/zero", "{d}/gc_11_0_0_mec.bin: a character device, not a regular file"),
])
def test_hcq_am_boot_mock_names_what_is_wrong_with_the_firmware_folder(fw_links, tmp_path, capsys, monkeypatch, kind, message):
  """The mock machine shows the host's firmware folder as it is (a file, a folder, a device), so the driver's
  checks meet what a real machine would show them."""
  if kind == "folder is a file":
    d = tmp_path / "afile"
    d.write_bytes(b"root:x:0:0\n")
  else:
    d = fw_links
    _replace_with(fw_links, "gc_11_0_0_mec.bin", kind)
  monkeypatch.setenv("HCQ_FIRMWARE_DIR", str(d))
  assert hcq_main(["am", "boot", "--mock"]) == 1
  err = capsys.readouterr().err
  assert message.format(d=d) in err and "no such firmware file" not in err and "Traceback" not in err


def test_hcq_am_boot_mock_with_a_wrong_file_under_a_name_fails(fw_links, fw_dir, capsys, monkeypatch):
  """The audit's reproduction: gc_11_0_0_mec.bin copied over smu_13_0_0.bin booted, 'SMU firmware 78.74.0 running'."""
  (fw_links / "smu_13_0_0.bin").unlink()
  (fw_links / "smu_13_0_0.bin").symlink_to(_os.path.join(fw_dir, "gc_11_0_0_mec.bin"))
  monkeypatch.setenv("HCQ_FIRMWARE_DIR", str(fw_links))
  assert hcq_main(["am", "boot", "--mock", "--trace"]) == 1
  out, err = capsys.readouterr()
  assert "LOAD_IP_FW SMU" not in out and "SMU firmware" not in out
  assert "smu_13_0_0.bin: ip_version 11.0, but the file is loaded for MP1 13.0.0" in err

