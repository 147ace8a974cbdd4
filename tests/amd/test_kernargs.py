"""The AMD argument layout (code object v5 kernargs, drivers/amd/kernargs.py): explicit arguments checked and packed,
hidden arguments filled per launch shape."""
import struct

import pytest

from hcq import DeviceError
from hcq.drivers.amd.kernargs import Arg, KernargLayout


VADD_ARGS = [Arg(0, 8, "global_buffer", "float*", "a"), Arg(8, 8, "global_buffer", "float*", "b"),
             Arg(16, 8, "global_buffer", "float*", "c"), Arg(24, 4, "by_value", "uint", "n"),
             Arg(32, 4, "hidden_block_count_x"), Arg(36, 4, "hidden_block_count_y"), Arg(40, 4, "hidden_block_count_z"),
             Arg(44, 2, "hidden_group_size_x"), Arg(46, 2, "hidden_group_size_y"), Arg(48, 2, "hidden_group_size_z"),
             Arg(96, 2, "hidden_grid_dims")]


class B:
  def __init__(self, va): self.va = va


def test_kernarg_layout_packs_explicit_and_hidden_arguments():
  lay = KernargLayout("vadd", VADD_ARGS, 288)
  exp = lay.check_and_pack((B(0x1000), B(0x2000), B(0x3000), 77), B)
  assert exp == struct.pack("<QQQI", 0x1000, 0x2000, 0x3000, 77)
  hid = lay.hidden_values((4, 1, 1), (64, 1, 1), {})
  full = exp + hid
  assert len(full) == 288
  assert struct.unpack_from("<III", full, 32) == (4, 1, 1)
  assert struct.unpack_from("<HHH", full, 44) == (64, 1, 1)
  assert struct.unpack_from("<H", full, 96) == (1,)


@pytest.mark.parametrize("args,msg", [
  ((B(1), B(2), B(3)), "takes 4 arguments"),
  ((B(1), B(2), 3, 4), "argument 2 .* needs a Buffer"),
  ((B(1), B(2), B(3), 1.5), "argument 3 .* needs an integer"),
  ((B(1), B(2), B(3), -1), "out of range"),
])
def test_kernarg_layout_rejects_wrong_arguments(args, msg):
  with pytest.raises(DeviceError, match=msg):
    KernargLayout("vadd", VADD_ARGS, 288).check_and_pack(args, B)


def test_untyped_and_float_scalars():
  args = [Arg(0, 4, "by_value", "", "n"), Arg(4, 4, "by_value", "float", "x"), Arg(8, 8, "by_value", "", "big"),
          Arg(16, 8, "by_value", "float2", "v")]
  lay = KernargLayout("k", args, 24)
  raw = lay.check_and_pack((-2, 3, 2**64 - 1, b"\x01" * 8), B)
  assert struct.unpack("<ifQ8s", raw) == (-2, 3.0, 2**64 - 1, b"\x01" * 8)
  with pytest.raises(DeviceError, match="does not fit 4 bytes"): lay.check_and_pack((2**32, 0.0, 0, bytes(8)), B)
  with pytest.raises(DeviceError, match="raw bytes"): lay.check_and_pack((1, 0.0, 0, 5), B)
  with pytest.raises(DeviceError, match="needs a number"): lay.check_and_pack((1, "x", 0, bytes(8)), B)
