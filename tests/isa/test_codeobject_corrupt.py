"""Corrupt code objects are refused with one hcq error (CodeObjectError from the reader, DeviceError from dev.load,
exit status 1 from `hcq run` / `hcq disasm`), never a Python exception from deep inside: metadata fields of the
wrong msgpack type, hidden arguments whose size does not match their kind, load images of implausible size."""
import struct

import pytest

import hcq
from hcq import DeviceError
from hcq.cli import main
from hcq.compiler.isa.amd.asm import assemble
from hcq.compiler.isa.amd.codeobject import CodeObject
from hcq.compiler.isa.amd.cowriter import Arg, KernelSpec, write_code_object
from hcq.compiler.isa.amd.errors import CodeObjectError
from hcq.compiler.isa.amd.elf import SHDR, parse_elf

ARGS = [Arg(0, 8, "global_buffer", "out"), Arg(8, 4, "by_value", "n", type_name="uint"),
        Arg(16, 4, "hidden_block_count_x"), Arg(20, 2, "hidden_group_size_x")]


class _Spec(KernelSpec):
  """A KernelSpec whose metadata map goes through `edit` before it is written."""
  edit = staticmethod(lambda md: None)

  def metadata(self) -> dict:
    md = super().metadata()
    self.edit(md)
    return md


def _code_object(edit=lambda md: None, args=ARGS, top=None) -> bytes:
  spec = _Spec("k", assemble("s_endpgm"), list(args), kernarg_segment_size=32)
  spec.edit = edit
  if top is None: return write_code_object([spec])
  import msgpack
  real = msgpack.packb
  def packb(md, *a, **kw):
    top(md)
    return real(md, *a, **kw)
  msgpack.packb = packb
  try: return write_code_object([spec])
  finally: msgpack.packb = real


def _set(key, value):
  def edit(md): md[key] = value
  return edit


def _set_arg(i, key, value):
  def edit(md): md[".args"][i][key] = value
  return edit


BAD_METADATA = {
  "name is an int": _set(".name", 5),
  "name missing": lambda md: md.pop(".name"),
  "symbol is a list": _set(".symbol", ["k.kd"]),
  "args is a str": _set(".args", "out, n"),
  "an arg is a str": lambda md: md[".args"].__setitem__(0, "out"),
  "arg size is a str": _set_arg(0, ".size", "8"),
  "arg offset is negative": _set_arg(1, ".offset", -8),
  "arg offset is a float": _set_arg(1, ".offset", 8.0),
  "arg value_kind is an int": _set_arg(0, ".value_kind", 1),
  "arg type_name is a map": _set_arg(1, ".type_name", {"a": 1}),
  "arg pointee_align is a str": _set_arg(0, ".pointee_align", "4"),
  "kernarg size is a str": _set(".kernarg_segment_size", "32"),
  "kernarg size is 2^40": _set(".kernarg_segment_size", 1 << 40),
  "kernarg align is a bool": _set(".kernarg_segment_align", True),
  "group segment is negative": _set(".group_segment_fixed_size", -1),
  "wavefront size is a str": _set(".wavefront_size", "32"),
  "reqd size is a str": _set(".reqd_workgroup_size", "64,1,1"),
  "reqd size has 2 dims": _set(".reqd_workgroup_size", [64, 1]),
  "reqd size has a 0": _set(".reqd_workgroup_size", [0, 1, 1]),
  "max flat size is nil": _set(".max_flat_workgroup_size", None),
}
BAD_TOP = {
  "target is an int": lambda md: md.__setitem__("amdhsa.target", 1100),
  "kernels is a map": lambda md: md.__setitem__("amdhsa.kernels", {"k": md["amdhsa.kernels"][0]}),
  "a kernel is a str": lambda md: md.__setitem__("amdhsa.kernels", ["k"]),
}
CASES = [pytest.param(_code_object(edit=e), id=n) for n, e in BAD_METADATA.items()] + \
        [pytest.param(_code_object(top=t), id=n) for n, t in BAD_TOP.items()]


def test_the_unedited_code_object_runs():
  """The cases below differ from this one by their one bad field."""
  with hcq.open("MOCK+AMD") as dev:
    prog = dev.load(_code_object(), "k")
    prog(dev.alloc(64), 1, global_size=(300,), local_size=(64,), wait=True)


@pytest.mark.parametrize("blob", CASES)
def test_metadata_of_the_wrong_type_is_a_code_object_error(blob):
  with pytest.raises(CodeObjectError, match="NT_AMDGPU_METADATA"): CodeObject.parse(blob)


@pytest.mark.parametrize("blob", CASES)
def test_dev_load_refuses_bad_metadata(blob):
  with hcq.open("MOCK+AMD") as dev:
    with pytest.raises(DeviceError, match="not a loadable code object.*NT_AMDGPU_METADATA"): dev.load(blob)


@pytest.mark.parametrize("blob", CASES[::4])
def test_cli_reports_bad_metadata_in_one_line(blob, tmp_path, capsys):
  path = tmp_path / "bad.hsaco"
  path.write_bytes(blob)
  for argv in (["disasm", str(path)], ["run", str(path), "--device", "MOCK+AMD", "--out", str(tmp_path), "64", "=1"]):
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "NT_AMDGPU_METADATA" in err and err.count("\n") == 1 and "Traceback" not in err, err


@pytest.mark.parametrize("kind,size", [("hidden_block_count_x", 1), ("hidden_group_size_x", 1),
                                       ("hidden_group_size_x", 0), ("hidden_global_offset_x", 2),
                                       ("hidden_grid_dims", 1), ("hidden_queue_ptr", 4)])
def test_a_hidden_argument_of_the_wrong_size_is_refused_at_load(kind, size):
  """Before, the size was trusted: the first launch died with OverflowError (int.to_bytes of a grid of 300 work-groups
  into 1 byte), or silently wrote a truncated value."""
  blob = _code_object(args=ARGS[:2] + [Arg(24, size, kind)])
  with hcq.open("MOCK+AMD") as dev:
    with pytest.raises(DeviceError, match=f"hidden argument {kind} at offset 24 is {size} bytes, not"):
      prog = dev.load(blob, "k")
      prog(dev.alloc(64), 1, global_size=(300,), local_size=(64,), wait=True)


def test_an_unknown_hidden_argument_keeps_any_size():
  """Hidden kinds hcq does not fill stay zero whatever their size: nothing to check."""
  with hcq.open("MOCK+AMD") as dev:
    prog = dev.load(_code_object(args=ARGS[:2] + [Arg(24, 3, "hidden_some_future_kind")]), "k")
    prog(dev.alloc(64), 1, global_size=(300,), local_size=(64,), wait=True)


def test_a_huge_kernarg_segment_is_refused_at_load():
  with hcq.open("MOCK+AMD") as dev:
    with pytest.raises(DeviceError, match="kernarg segment of 16777216 bytes"):
      dev.load(_code_object(edit=_set(".kernarg_segment_size", 1 << 24)), "k")


def test_a_section_address_far_away_is_refused_not_allocated():
  """A flipped high bit of sh_addr put a section 512 MiB into the load image: the reader allocated it (and up to
  4 GiB, which the OOM killer ended)."""
  blob = bytearray(_code_object())
  elf = parse_elf(bytes(blob))
  text = elf.section(".text")
  off = text.header_offset + 16   # Elf64_Shdr.sh_addr
  struct.pack_into("<Q", blob, off, text.addr | 1 << 29)
  with pytest.raises(CodeObjectError, match="load image of 0x2.* MiB a code object may take"): CodeObject.parse(bytes(blob))
  assert SHDR.size == 64


def _moved(section: str, by: int) -> bytes:
  """The code object with one section's sh_addr moved by `by` bytes (its symbols stay where they were)."""
  blob = bytearray(_code_object())
  sec = parse_elf(bytes(blob)).section(section)
  struct.pack_into("<Q", blob, sec.header_offset + 16, sec.addr + by)    # Elf64_Shdr.sh_addr
  return bytes(blob)


def test_a_descriptor_outside_its_section_is_refused_not_read_as_zeros(tmp_path, capsys):
  """The fuzz found .rodata moved 32 MiB up by one flipped bit: the descriptor symbol then pointed into a gap of the
  load image, read as zeros, made the entry the descriptor's own address and the code run to the end of the image:
  `hcq disasm` printed 720 MB. A descriptor must lie inside a loaded section, the entry in an executable one."""
  blob = _moved(".rodata", 1 << 25)
  with pytest.raises(CodeObjectError, match="descriptor 'k.kd' at 0x[0-9a-f]+ is not inside a loaded section"):
    CodeObject.parse(blob)
  path = tmp_path / "moved.hsaco"
  path.write_bytes(blob)
  assert main(["disasm", str(path)]) == 1
  out, err = capsys.readouterr()
  assert out == "" and "is not inside a loaded section" in err


def test_an_entry_outside_every_executable_section_is_refused():
  """.text moved away from where the descriptor's entry offset points: the entry lands in no executable section."""
  with pytest.raises(CodeObjectError, match="entry 0x[0-9a-f]+ .* is not in an executable section"):
    CodeObject.parse(_moved(".text", 1 << 24))
