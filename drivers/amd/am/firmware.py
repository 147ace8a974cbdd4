"""AMD firmware containers as Linux's amdgpu loads them (/lib/firmware/amdgpu/*.bin).

Every file starts with amdgpu_ucode.h's struct common_firmware_header; a type-specific header follows it, chosen by
the header version AND by which IP the file is for. The header does not say which IP: the driver knows which file
it asked for. So the kind is taken from the file name (its block word: "gc_11_0_0_mec.bin" is gfx, "psp_13_0_0_sos.bin"
a PSP SOS, "smu_13_0_0.bin" an SMC, ...), and every result says so (Firmware.kind_from).

Layouts are hcq.autogen.amd.ucode's generated structs (amdgpu_ucode.h of linux-source-6.12, checked against gcc);
none are written by hand here. Every size and offset the headers give is checked against the file length, so a
truncated or corrupt file is a FirmwareError naming the file and the field, never an exception from deep inside.
Linux itself checks only that size_bytes equals the file length (and no CRC: the crc32 field is not zlib's CRC-32).

read()/load() ask the OS interface what is at the path before opening it: a firmware folder that is not a folder, a
name that is a folder, a device or a FIFO is named as such and never read (`hcq fw` uses the same read()).
check_identity() says whether a container is the one its name says for the IP versions the discovery table reports.
"""
from __future__ import annotations

import ctypes
import dataclasses
import errno
import os
import stat

from ....errors import HCQError, OSCallError
from ....autogen.amd import ucode as U

PACKAGE = "firmware-amd-graphics"   # Debian's package of /lib/firmware/amdgpu (component non-free-firmware)
COMMON = U.struct_common_firmware_header


class FirmwareError(HCQError):
  """A firmware file that is missing, unreadable, or not a well-formed container: the message names the file."""


# ---- which container a file is: its block word (the last name token that is one) -> kind
BLOCKS = {
  "ce": "gfx", "me": "gfx", "pfp": "gfx", "mec": "gfx", "mec2": "gfx",
  "rlc": "rlc", "mes": "mes", "mes1": "mes", "imu": "imu",
  "sdma": "sdma", "sdma1": "sdma", "smc": "smc", "smu": "smc",
  "sos": "psp", "ta": "ta", "asd": "psp_ta", "toc": "psp_ta", "cap": "psp_ta",
  "mc": "mc", "dmcu": "dmcu", "dmcub": "dmcub", "info": "gpu_info",
  "uvd": "uvd", "vce": "vce", "vcn": "vcn", "vpe": "vpe", "umsch": "umsch_mm",
}

# kind -> {(header major, minor): struct}: the type-specific header each version of each kind has in amdgpu_ucode.h
LAYOUTS = {
  "gfx": {(1, 0): U.struct_gfx_firmware_header_v1_0, (2, 0): U.struct_gfx_firmware_header_v2_0},
  "rlc": {(1, 0): U.struct_rlc_firmware_header_v1_0, (2, 0): U.struct_rlc_firmware_header_v2_0,
          (2, 1): U.struct_rlc_firmware_header_v2_1, (2, 2): U.struct_rlc_firmware_header_v2_2,
          (2, 3): U.struct_rlc_firmware_header_v2_3, (2, 4): U.struct_rlc_firmware_header_v2_4},
  "mes": {(1, 0): U.struct_mes_firmware_header_v1_0},
  "imu": {(1, 0): U.struct_imu_firmware_header_v1_0},
  "sdma": {(1, 0): U.struct_sdma_firmware_header_v1_0, (1, 1): U.struct_sdma_firmware_header_v1_1,
           (2, 0): U.struct_sdma_firmware_header_v2_0, (3, 0): U.struct_sdma_firmware_header_v3_0},
  "smc": {(1, 0): U.struct_smc_firmware_header_v1_0, (2, 0): U.struct_smc_firmware_header_v2_0,
          (2, 1): U.struct_smc_firmware_header_v2_1},
  "psp": {(1, 0): U.struct_psp_firmware_header_v1_0, (1, 1): U.struct_psp_firmware_header_v1_1,
          (1, 2): U.struct_psp_firmware_header_v1_2, (1, 3): U.struct_psp_firmware_header_v1_3,
          (2, 0): U.struct_psp_firmware_header_v2_0, (2, 1): U.struct_psp_firmware_header_v2_1},
  # ASD, TOC and CAP are read through psp_firmware_header_v1_0 whatever the minor version (as Linux does)
  "psp_ta": {(1, 0): U.struct_psp_firmware_header_v1_0, (1, 1): U.struct_psp_firmware_header_v1_0},
  "ta": {(1, 0): U.struct_ta_firmware_header_v1_0, (2, 0): U.struct_ta_firmware_header_v2_0},
  "mc": {(1, 0): U.struct_mc_firmware_header_v1_0},
  "dmcu": {(1, 0): U.struct_dmcu_firmware_header_v1_0},
  "dmcub": {(1, 0): U.struct_dmcub_firmware_header_v1_0},
  "gpu_info": {(1, 0): U.struct_gpu_info_firmware_header_v1_0},
  "uvd": {(1, 0): COMMON}, "vce": {(1, 0): COMMON}, "vcn": {(1, 0): COMMON},
  "vpe": {(1, 0): U.struct_vpe_firmware_header_v1_0},
  "umsch_mm": {(1, 0): U.struct_umsch_mm_firmware_header_v1_0},
}

# struct -> the regions its fields describe: (offset field or None for 0, size field, base, unit). base "file": the
# offset counts from the start of the file; "ucode": from ucode_array_offset_bytes, and the region must lie inside
# the ucode array. unit: bytes per count (jump tables count dwords). Bases are those of Linux's loaders, and every
# file of firmware-amd-graphics 20230210-5 satisfies them (tests/amd/test_firmware.py).
_JT = [("jt_offset", "jt_size", "ucode", 4)]
_RLC2 = _JT + [("reg_list_format_array_offset_bytes", "reg_list_format_size_bytes", "file", 1),
               ("reg_list_array_offset_bytes", "reg_list_size_bytes", "file", 1),
               ("reg_list_format_separate_array_offset_bytes", "reg_list_format_separate_size_bytes", "file", 1),
               ("reg_list_separate_array_offset_bytes", "reg_list_separate_size_bytes", "file", 1)]
_RLC21 = _RLC2 + [(f"save_restore_list_{x}_offset_bytes", f"save_restore_list_{x}_size_bytes", "file", 1)
                  for x in ("cntl", "gpm", "srm")]
_RLC22 = _RLC21 + [(f"rlc_{x}_ucode_offset_bytes", f"rlc_{x}_ucode_size_bytes", "file", 1) for x in ("iram", "dram")]
_RLC23 = _RLC22 + [(f"{x}_ucode_offset_bytes", f"{x}_ucode_size_bytes", "file", 1) for x in ("rlcp", "rlcv")]
_RLC24 = _RLC23 + [(f"{x}_tap_delays_ucode_offset_bytes", f"{x}_tap_delays_ucode_size_bytes", "file", 1)
                   for x in ("global", "se0", "se1", "se2", "se3")]
_CTX_CTL = [(None, "ctx_ucode_size_bytes", "ucode", 1), ("ctl_ucode_offset", "ctl_ucode_size_bytes", "file", 1)]
REGIONS = {
  U.struct_gfx_firmware_header_v1_0: _JT,
  U.struct_gfx_firmware_header_v2_0: [("ucode_offset_bytes", "ucode_size_bytes", "file", 1),
                                      ("data_offset_bytes", "data_size_bytes", "file", 1)],
  U.struct_rlc_firmware_header_v2_0: _RLC2, U.struct_rlc_firmware_header_v2_1: _RLC21,
  U.struct_rlc_firmware_header_v2_2: _RLC22, U.struct_rlc_firmware_header_v2_3: _RLC23,
  U.struct_rlc_firmware_header_v2_4: _RLC24,
  U.struct_mes_firmware_header_v1_0: [("mes_ucode_offset_bytes", "mes_ucode_size_bytes", "file", 1),
                                      ("mes_ucode_data_offset_bytes", "mes_ucode_data_size_bytes", "file", 1)],
  U.struct_imu_firmware_header_v1_0: [("imu_iram_ucode_offset_bytes", "imu_iram_ucode_size_bytes", "ucode", 1),
                                      ("imu_dram_ucode_offset_bytes", "imu_dram_ucode_size_bytes", "ucode", 1)],
  U.struct_sdma_firmware_header_v1_0: _JT, U.struct_sdma_firmware_header_v1_1: _JT,
  U.struct_sdma_firmware_header_v2_0: _CTX_CTL, U.struct_vpe_firmware_header_v1_0: _CTX_CTL,
  U.struct_smc_firmware_header_v2_0: [("ppt_offset_bytes", "ppt_size_bytes", "file", 1)],
  U.struct_mc_firmware_header_v1_0: [("io_debug_array_offset_bytes", "io_debug_size_bytes", "file", 1)],
  U.struct_dmcu_firmware_header_v1_0: [("intv_offset_bytes", "intv_size_bytes", "ucode", 1)],
  U.struct_dmcub_firmware_header_v1_0: [(None, "inst_const_bytes", "ucode", 1)],
}


def _enum_names(prefix: str) -> dict[int, str]:
  """value -> name of a generated enum's constants (amdgpu_ucode.h's enum psp_fw_type, enum ta_fw_type)."""
  return {v: k for k, v in vars(U).items() if k.startswith(prefix) and not k.endswith("_MAX_INDEX")}


PSP_FW_TYPES, TA_FW_TYPES = _enum_names("PSP_FW_TYPE_"), _enum_names("TA_FW_TYPE_")
# the flexible arrays of psp_fw_bin_desc: struct -> (count field, the enum whose names the fw_type numbers take)
DESC_LISTS = {
  U.struct_psp_firmware_header_v2_0: ("psp_fw_bin_count", PSP_FW_TYPES),
  U.struct_psp_firmware_header_v2_1: ("psp_fw_bin_count", PSP_FW_TYPES),
  U.struct_ta_firmware_header_v2_0: ("ta_fw_bin_count", TA_FW_TYPES),
}


@dataclasses.dataclass
class Firmware:
  """One container. fields: the type-specific header's fields (nested version structs flattened, legacy bin
  descriptors as dicts, smc v2.1's pptables as a list); components: the psp_fw_bin_desc entries of PSP/TA v2."""
  file: str
  kind: str | None        # BLOCKS' kinds; None: a name hcq does not know (only the common header is read)
  kind_from: str          # how the kind was decided
  struct: str             # the C struct the header was read as
  common: dict
  fields: dict
  components: list[dict]
  notes: list[str]
  data: bytes = dataclasses.field(repr=False, default=b"")

  def ucode(self) -> bytes:
    """The ucode array (ucode_array_offset_bytes, ucode_size_bytes; checked to lie in the file)."""
    off = self.common["ucode_array_offset_bytes"]
    return self.data[off:off + self.common["ucode_size_bytes"]]

  def as_json(self) -> dict:
    c = self.common
    return {"file": self.file, "kind": self.kind, "kind_from": self.kind_from, "struct": self.struct,
            "size_bytes": c["size_bytes"], "header_size_bytes": c["header_size_bytes"],
            "header_version": [c["header_version_major"], c["header_version_minor"]],
            "ip_version": [c["ip_version_major"], c["ip_version_minor"]],
            "ucode_version": c["ucode_version"], "ucode_size_bytes": c["ucode_size_bytes"],
            "ucode_array_offset_bytes": c["ucode_array_offset_bytes"], "crc32": c["crc32"],
            "fields": self.fields, "components": self.components, "notes": self.notes}


def block_word(name: str) -> str | None:
  """The last '_'-separated token of the base name that is a block word ("navi14_ce_wks.bin": ce; "sdma_6_0_0.bin":
  sdma; "psp_13_0_0_sos.bin": sos), None when there is none."""
  stem = os.path.basename(name)
  stem = stem[:-4] if stem.endswith(".bin") else stem
  for token in reversed(stem.split("_")):
    if token in BLOCKS: return token
  return None


def kind_of(name: str) -> tuple[str | None, str]:
  """(kind, how it was decided) from a file name: its block word (block_word)."""
  token = block_word(name)
  if token: return BLOCKS[token], f"file name ({token!r}; the header does not say which IP it is for)"
  return None, "file name not recognized: only the common header is read"


def _flatten(obj, out: dict) -> dict:
  """The fields of a type-specific header without the common header: nested version structs (v1_0, v2_2, ...)
  flattened in place, legacy bin descriptors as dicts, flexible arrays left to the components."""
  for fname, ftype in obj._fields_:
    value = getattr(obj, fname)
    if ftype is COMMON: continue
    if isinstance(value, ctypes.Array) and len(value) == 0: continue
    if ftype is U.struct_psp_fw_legacy_bin_desc:
      out[fname] = {n: getattr(value, n) for n, _ in ftype._fields_}
    elif isinstance(value, ctypes.Structure): _flatten(value, out)
    else: out[fname] = value
  return out


class _Reader:
  """Checks on one file's bytes; every failure names the file and the field."""

  def __init__(self, name: str, data: bytes):
    self.name, self.data = name, data

  def fail(self, why: str):
    raise FirmwareError(f"{self.name}: {why}")

  def struct_at(self, cls, offset: int, what: str):
    if offset + ctypes.sizeof(cls) > len(self.data):
      self.fail(f"{what} ({cls.__name__[len('struct_'):]}, {ctypes.sizeof(cls)} bytes at {offset}) runs past the end "
                f"of the file ({len(self.data)} bytes): truncated, or not a firmware container")
    return cls.from_buffer_copy(self.data, offset)

  def region(self, what: str, offset: int, size: int, limit: int, within: str):
    if offset + size > limit: self.fail(f"{what}: {size} bytes at {offset} run past the end of {within} ({limit} bytes)")


def parse(name: str, data: bytes) -> Firmware:
  """The container in data; name is its file name or path (its base name decides the kind, as the driver's request
  does in Linux). Raises FirmwareError naming the file for anything that is not a well-formed container."""
  rd = _Reader(name, bytes(data))
  hdr = rd.struct_at(COMMON, 0, "the common header")
  size = len(rd.data)
  if hdr.size_bytes != size:
    rd.fail(f"size_bytes says {hdr.size_bytes} bytes but the file has {size}: truncated, corrupt, or not a "
            f"firmware container")
  if not ctypes.sizeof(COMMON) <= hdr.header_size_bytes <= size:
    rd.fail(f"header_size_bytes {hdr.header_size_bytes} is not between {ctypes.sizeof(COMMON)} and the file size {size}")
  rd.region("ucode_array_offset_bytes/ucode_size_bytes", hdr.ucode_array_offset_bytes, hdr.ucode_size_bytes,
            size, "the file")
  version = (hdr.header_version_major, hdr.header_version_minor)
  kind, kind_from = kind_of(name)
  cls = COMMON if kind is None else LAYOUTS[kind].get(version)
  if cls is None:
    known = ", ".join(f"{a}.{b}" for a, b in LAYOUTS[kind])
    rd.fail(f"header version {version[0]}.{version[1]} is not one amdgpu_ucode.h defines for a {kind} container "
            f"({known}); the kind comes from the {kind_from.split(' (')[0]}")
  struct = cls.__name__[len("struct_"):]
  full = rd.struct_at(cls, 0, f"the {struct} header")
  notes = []
  if hdr.header_size_bytes < ctypes.sizeof(cls):
    notes.append(f"header_size_bytes {hdr.header_size_bytes} is less than sizeof(struct {struct}) = "
                 f"{ctypes.sizeof(cls)}; the header is read in full, as Linux reads it")
  fields = _flatten(full, {}) if cls is not COMMON else {}
  _check_regions(rd, cls, fields, hdr)
  components = _components(rd, cls, full, hdr)
  if cls is U.struct_smc_firmware_header_v2_1: fields["pptables"] = _pptables(rd, fields)
  common = {n: getattr(hdr, n) for n, _ in COMMON._fields_}
  return Firmware(os.path.basename(name), kind, kind_from, struct, common, fields, components, notes, rd.data)


def check_identity(fw: Firmware, ip_name: str, ip_version, structs) -> None:
  """That fw is the container its name says, for the IP it is loaded for: FirmwareError naming the file, the field,
  what it holds and what was expected. ip_version: the IP's (major, minor, revision) from the discovery table;
  structs: the header structs (names) a file of this name has for that IP.

  What AMD's files hold (firmware-amd-graphics 20230210-5, every gc_11_*, psp_13_*, smu_13_*, sdma_6_* file):
  ip_version_major.minor is the IP's major.minor and never its revision (gc_11_0_0/1/2_* all say 11.0, psp_13_0_0/
  4/5/7/8_* 13.0, smu_13_0_0/7 13.0, sdma_6_0_0/1/2 6.0), so the header's (major, minor) must equal the discovery
  table's, and only the file name tells the revision. The header (kind and version) is the same for every file of a
  name within that set, but for gc_11_0_1's CP files (gfx v1.0, not RS64): the caller lists what it can use."""
  c = fw.common
  have, want = (c["ip_version_major"], c["ip_version_minor"]), tuple(ip_version[:2])
  if have != want:
    raise FirmwareError(f"{fw.file}: ip_version {have[0]}.{have[1]}, but the file is loaded for {ip_name} "
                        f"{'.'.join(map(str, ip_version))} (expected ip_version {want[0]}.{want[1]}): the firmware of "
                        f"another IP or GPU under this name")
  if fw.struct not in structs:
    raise FirmwareError(f"{fw.file}: header version {c['header_version_major']}.{c['header_version_minor']} makes it "
                        f"a {fw.struct}, but a {os.path.splitext(fw.file)[0]} file for {ip_name} "
                        f"{'.'.join(map(str, ip_version))} has a {' or '.join(sorted(structs))}: the firmware of another "
                        f"IP or GPU under this name")


def _check_regions(rd: _Reader, cls, fields: dict, hdr) -> None:
  ucode_size = hdr.ucode_size_bytes
  for off_field, size_field, base, unit in REGIONS.get(cls, ()):
    off = fields[off_field] * unit if off_field else 0
    what = f"{off_field}/{size_field}" if off_field else size_field
    if base == "file": rd.region(what, off, fields[size_field] * unit, len(rd.data), "the file")
    else: rd.region(what, off, fields[size_field] * unit, ucode_size, "the ucode array (ucode_size_bytes)")
  for name, value in fields.items():   # legacy bin descriptors (PSP v1, TA v1) count from the ucode array
    if isinstance(value, dict):
      rd.region(f"{name}.offset_bytes/size_bytes", value["offset_bytes"], value["size_bytes"], ucode_size,
                "the ucode array (ucode_size_bytes)")


def _components(rd: _Reader, cls, full, hdr) -> list[dict]:
  if cls not in DESC_LISTS: return []
  count_field, names = DESC_LISTS[cls]
  count = getattr(full, count_field)
  desc = U.struct_psp_fw_bin_desc
  table = ctypes.sizeof(cls)   # the flexible array follows the fixed part
  rd.region(f"{count_field} ({count} psp_fw_bin_desc entries of {ctypes.sizeof(desc)} bytes)", table,
            count * ctypes.sizeof(desc), len(rd.data), "the file")
  out = []
  for i in range(count):
    d = desc.from_buffer_copy(rd.data, table + i * ctypes.sizeof(desc))
    rd.region(f"psp_fw_bin[{i}].offset_bytes/size_bytes", d.offset_bytes, d.size_bytes, hdr.ucode_size_bytes,
              "the ucode array (ucode_size_bytes)")
    out.append({"type": d.fw_type, "name": names.get(d.fw_type), "version": d.fw_version,
                "offset": d.offset_bytes, "size": d.size_bytes})
  return out


def _pptables(rd: _Reader, fields: dict) -> list[dict]:
  """smc v2.1: pptable_count smc_soft_pptable_entry records at pptable_entry_offset, each a table in the file."""
  entry = U.struct_smc_soft_pptable_entry
  count, at = fields["pptable_count"], fields["pptable_entry_offset"]
  rd.region(f"pptable_entry_offset/pptable_count ({count} entries of {ctypes.sizeof(entry)} bytes)", at,
            count * ctypes.sizeof(entry), len(rd.data), "the file")
  out = []
  for i in range(count):
    e = entry.from_buffer_copy(rd.data, at + i * ctypes.sizeof(entry))
    rd.region(f"pptable[{i}].ppt_offset_bytes/ppt_size_bytes", e.ppt_offset_bytes, e.ppt_size_bytes,
              len(rd.data), "the file")
    out.append({n: getattr(e, n) for n, _ in entry._fields_})
  return out


MAX_BYTES = 256 << 20   # firmware files are a few MB at most; anything far larger is not one (never read it whole)


def missing(path: str) -> str:
  return (f"{path}: no such firmware file (AMD's firmware is in Debian's {PACKAGE} package: run `hcq fw fetch` to "
          f"download it, or HCQ_FIRMWARE_DIR chooses another folder)")


def _kind_of_mode(mode: int) -> str:
  for test, what in ((stat.S_ISREG, "a regular file"), (stat.S_ISDIR, "a folder"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                     (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket")):
    if test(mode): return what
  return "an unknown kind of file"


def not_a_file(path: str, st) -> str | None:
  """Why what st (stat, links followed) describes is not a firmware file to read, None when it may be read: a
  folder, a device, a FIFO are never opened for reading (/dev/zero would never end, a FIFO would block). Shared by
  load() and `hcq fw`."""
  if stat.S_ISDIR(st.st_mode): return f"{path}: a folder, not a firmware file"
  if not stat.S_ISREG(st.st_mode):
    return f"{path}: {_kind_of_mode(st.st_mode)}, not a regular file, so not a firmware container"
  if st.st_size > MAX_BYTES: return f"{path}: {st.st_size} bytes is far too large for a firmware container"
  return None


def _stat(os_iface, path: str, what: str):
  """os_iface.stat(path) (links followed), None when nothing is there; other failures are a FirmwareError."""
  try: return os_iface.stat(path)
  except OSCallError as e:
    if e.errno == errno.ENOENT: return None
    if e.errno == errno.ENOTDIR: raise FirmwareError(f"{path}: a part of the path is not a folder") from None
    raise FirmwareError(f"cannot read {what} {path}: {os.strerror(e.errno) if e.errno else e}") from None


def read(os_iface, path: str) -> bytes:
  """The bytes of the firmware file at path, through the OS interface: it is checked to be a regular file of a
  sensible size (stat) before it is opened, and the read is bounded."""
  st = _stat(os_iface, path, "the firmware file")
  if st is None: raise FirmwareError(missing(path))
  why = not_a_file(path, st)
  if why: raise FirmwareError(why)
  # O_NONBLOCK: should the file have been replaced by a FIFO since the stat, the open still does not block
  try: f = os_iface.open(path, os.O_RDONLY | os.O_NONBLOCK)
  except OSCallError as e: raise FirmwareError(f"cannot read {path}: {os.strerror(e.errno) if e.errno else e}") from None
  # bounded: the size stat gave, and a byte more to see a file that grew since (an OS that reports no size: the cap)
  try: data = f.read((st.st_size or MAX_BYTES) + 1)
  finally: f.close()
  if len(data) > MAX_BYTES: raise FirmwareError(f"{path}: more than {MAX_BYTES} bytes, far too large for a firmware container")
  return data


def load(os_iface, firmware_dir: str, name: str) -> Firmware:
  """The container `name` in firmware_dir (Config.firmware_dir), read through the OS interface. The folder is checked
  first, so that a firmware folder that is a file, or missing, is named as such and not as a missing firmware file;
  a missing file is an error naming it and the Debian package that provides AMD's firmware."""
  st = _stat(os_iface, firmware_dir, "the firmware folder")
  if st is None:
    raise FirmwareError(f"{firmware_dir}: the firmware folder does not exist (AMD's firmware is in Debian's {PACKAGE} "
                        f"package: run `hcq fw fetch` to download it, or HCQ_FIRMWARE_DIR chooses another folder)")
  if not stat.S_ISDIR(st.st_mode):
    raise FirmwareError(f"{firmware_dir}: {_kind_of_mode(st.st_mode)}, not a folder (the firmware folder, "
                        f"HCQ_FIRMWARE_DIR, must be a folder of firmware files)")
  why = writable_by_anyone(firmware_dir, st, "the firmware folder")
  if why: raise FirmwareError(why)
  path = os.path.join(firmware_dir, name)
  fst = _stat(os_iface, path, "the firmware file")
  why = fst is not None and (not_a_file(path, fst) or writable_by_anyone(path, fst, "the firmware file"))
  if why: raise FirmwareError(why)
  return parse(name, read(os_iface, path))


def writable_by_anyone(path: str, st, what: str) -> str | None:
  """Why a firmware folder or file is not used: any user may write to it (mode o+w; a sticky folder such as /tmp
  too, since anyone may still create names in it), so what the GPU would be given may have been planted. The same
  reason hcq refuses a cache folder (safefiles.private_dir). None when only its owner and group may write."""
  mode = stat.S_IMODE(st.st_mode)
  if not mode & stat.S_IWOTH: return None
  return (f"{path}: {what} is writable by every user (mode {mode:o}), so its firmware may have been planted: not used "
          f"(chmod o-w it, or choose another folder with HCQ_FIRMWARE_DIR)")
