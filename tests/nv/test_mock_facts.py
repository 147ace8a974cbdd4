"""The mock NV GPU and the NV driver each hold their own copy of the hardware facts they share (the mock may not import
the driver): the RM/UVM ABI, the QMD bit ranges, the CUDA parameter base, the PTX entry record. These tests hold the
copies equal, so that a fact fixed in one place cannot silently differ in the other."""
import ctypes

import pytest

from hcq.drivers.nv import abi as driver_abi, program
from hcq.drivers.nv.tables import qmd as qmd_table
from hcq.mockgpu.nv import abi as mock_abi, gpu, qmd as mock_qmd


def _layout(struct):
  return [(f[0], getattr(struct, f[0]).offset, getattr(struct, f[0]).size) for f in struct._fields_], ctypes.sizeof(struct)


def test_the_abi_tables_are_equal():
  names = [n for n in dir(driver_abi) if not n.startswith("_") and (n.isupper() or n.startswith("UVM") or n.startswith("NV"))]
  assert names
  for n in names:
    d, m = getattr(driver_abi, n), getattr(mock_abi, n, None)
    assert m is not None, f"mock abi lacks {n}"
    if isinstance(d, type) and issubclass(d, (ctypes.Structure, ctypes.Array)):
      if issubclass(d, ctypes.Structure): assert _layout(d) == _layout(m), n
      else: assert ctypes.sizeof(d) == ctypes.sizeof(m), n
    elif not callable(d): assert d == m, n


@pytest.mark.parametrize("major", [3, 4, 5])
def test_the_mocks_qmd_ranges_are_the_cited_tables(major):
  layout, size = mock_qmd.LAYOUTS[major]
  table = qmd_table.for_major(major)
  assert size == table.size_bytes
  for name, rng in layout.items(): assert table[name] == rng, f"V{major} {name}"


def test_the_parameter_base_and_the_ptx_entry_record_are_the_same():
  assert gpu.PARAM_BASE == program.PARAM_BASE
  assert (gpu.PTX_ENTRY_MAGIC, gpu.PTX_ENTRY_HEADER) == (program.PTX_ENTRY_MAGIC, program.PTX_ENTRY_HEADER)
  from hcq.drivers.nv.device import QMD_MAJOR
  assert gpu.QMD_MAJOR == QMD_MAJOR


def test_the_os_descriptor_flags_are_the_generated_nvos_fields():
  from hcq.autogen.nv import nvos
  shift = lambda field: nvos.RANGES[field][1]
  assert driver_abi.NVOS02_FLAGS_PHYSICALITY_NONCONTIGUOUS == \
    nvos.NVOS02_FLAGS_PHYSICALITY_NONCONTIGUOUS << shift("NVOS02_FLAGS_PHYSICALITY")
  assert driver_abi.NVOS02_FLAGS_COHERENCY_CACHED == nvos.NVOS02_FLAGS_COHERENCY_CACHED << shift("NVOS02_FLAGS_COHERENCY")
