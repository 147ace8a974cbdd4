"""The mock NV GPU and the NV driver share the RM/UVM ABI and the QMD bit ranges through autogen/nv (rm_abi.py,
series.py, tables/: the mock may not import the driver; the RM call structs are the claimed series' generated ones);
the few facts each still writes itself (the CUDA parameter base, the PTX entry record) are held equal here, so that a
fact fixed in one place cannot silently differ in the other."""
import ctypes

import pytest

from hcq.autogen.nv import rm_abi as driver_abi
from hcq.autogen.nv.tables import qmd as qmd_table, rm as rm_table
from hcq.drivers.nv import program
from hcq.mockgpu.nv import abi as mock_abi, gpu, qmd as mock_qmd


def test_the_mock_uses_the_shared_abi_not_a_copy():
  """Every name of the shared ABI the mock uses is the very object of autogen/nv/rm_abi.py (a copy could drift)."""
  names = [n for n in dir(driver_abi) if not n.startswith("_") and (n.isupper() or n.startswith("UVM") or n.startswith("NV"))]
  names = [n for n in names if hasattr(mock_abi, n) and n not in ("NV_VASPACE_ALLOCATION_PARAMETERS", "NV_CHANNEL_ALLOC_PARAMS")]
  assert len(names) > 40
  for n in names:
    d = getattr(driver_abi, n)
    if isinstance(d, int): assert getattr(mock_abi, n) == d, n       # a number: equal (a copy of an int cannot drift)
    else: assert getattr(mock_abi, n) is d, n                        # a struct, table or function: the same object


@pytest.mark.parametrize("series", ["550", "570", "575", "580", "590"])
def test_the_mocks_rm_structs_are_the_claimed_series_generated_ones(series):
  """The RM call structs and params the mock decodes are the generated modules' of the release it claims (NVIDIA's
  headers at that tag), not its own copies and not the driver's."""
  from hcq.autogen.nv import series as nv_series
  from hcq.mockgpu.nv.rm import RMModel
  model = RMModel(None, [], series)
  m, u = nv_series.rm(series), nv_series.uvm(series)
  assert model.driver_version == nv_series.TAGS[series]
  assert model.escapes[m.NV_ESC_RM_MAP_MEMORY_DMA][0] is m.NVOS46_PARAMETERS
  assert model.escapes[m.NV_ESC_RM_ALLOC_MEMORY][0] is m.nv_ioctl_nvos02_parameters_with_fd
  assert model.escapes[m.NV_ESC_RM_CONTROL][0] is m.NVOS54_PARAMETERS
  assert model.uvm[u.UVM_FREE][0] is u.UVM_FREE_PARAMS
  for name, _ in rm_table.ESCAPES.items():
    if getattr(m, name) in model.escapes: assert getattr(mock_abi, name, getattr(m, name)) == getattr(m, name), name
  # the control handlers name their params by the header's struct name, looked up in the claimed module
  for attr in dir(RMModel):
    if attr.startswith("_ctrl_"):
      assert hasattr(m, getattr(RMModel, attr).__annotations__["p"].strip("\"'")), attr


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


def test_the_method_and_field_numbers_are_the_generated_class_headers():
  """The driver's pushbuffer constants (drivers/nv/gpfifo.py) and the mock's (mockgpu/nv/gpu.py) against the bindings
  generated from clc56f.h / clc86f.h (host methods, method headers, GPFIFO entries) and clc8b5.h (copy methods)."""
  from hcq.autogen.nv import clc56f, clc86f, clc8b5
  from hcq.drivers.nv import gpfifo as G
  R, R8 = clc56f.RANGES, clc8b5.RANGES
  host = {"SET_OBJECT": G.SET_OBJECT, "NON_STALL_INTERRUPT": G.NON_STALL_INTERRUPT, "WFI": G.WFI,
          "SEM_ADDR_LO": G.SEM_ADDR_LO, "SEM_EXECUTE": G.SEM_EXECUTE}
  for name, value in host.items():
    assert value == getattr(clc56f, f"NVC56F_{name}") == getattr(clc86f, f"NVC86F_{name}"), name
  assert (gpu.HOST_SEM_ADDR_LO, gpu.HOST_SEM_ADDR_HI, gpu.HOST_SEM_PAYLOAD_LO, gpu.HOST_SEM_PAYLOAD_HI, gpu.HOST_SEM_EXECUTE) == \
    (clc56f.NVC56F_SEM_ADDR_LO, clc56f.NVC56F_SEM_ADDR_HI, clc56f.NVC56F_SEM_PAYLOAD_LO, clc56f.NVC56F_SEM_PAYLOAD_HI,
     clc56f.NVC56F_SEM_EXECUTE)
  ops = {"RELEASE": G.SEM_OP_RELEASE, "ACQ_CIRC_GEQ": G.SEM_OP_ACQ_CIRC_GEQ, "ACQ_STRICT_GEQ": G.SEM_OP_ACQ_STRICT_GEQ,
         "ACQ_AND": G.SEM_OP_ACQ_AND, "ACQ_NOR": G.SEM_OP_ACQ_NOR, "ACQUIRE": G.SEM_OP_ACQUIRE}
  for name, value in ops.items(): assert value == getattr(clc56f, f"NVC56F_SEM_EXECUTE_OPERATION_{name}"), name
  assert R["NVC56F_SEM_EXECUTE_OPERATION"] == (2, 0)
  assert G.SEM_RELEASE_WFI == 1 << R["NVC56F_SEM_EXECUTE_RELEASE_WFI"][1]
  assert G.SEM_PAYLOAD_64 == gpu.SEM_PAYLOAD_64 == 1 << R["NVC56F_SEM_EXECUTE_PAYLOAD_SIZE"][1]
  assert G.SEM_RELEASE_TIMESTAMP == gpu.SEM_RELEASE_TIMESTAMP == 1 << R["NVC56F_SEM_EXECUTE_RELEASE_TIMESTAMP"][1]
  # method header: opcode 31:29, count 28:16, subchannel 15:13, address (method / 4) 11:0
  h = G.header(5, 0x400, 7, G.OP_INC)
  assert (h >> 29, (h >> 16) & 0x1FFF, (h >> 13) & 7, (h & 0xFFF) << 2) == (clc56f.NVC56F_DMA_INCR_OPCODE_VALUE, 7, 5, 0x400)
  assert (R["NVC56F_DMA_INCR_OPCODE"], R["NVC56F_DMA_INCR_COUNT"], R["NVC56F_DMA_INCR_SUBCHANNEL"],
          R["NVC56F_DMA_INCR_ADDRESS"]) == ((31, 29), (28, 16), (15, 13), (11, 0))
  assert (G.OP_NON_INC, G.OP_IMMD) == (clc56f.NVC56F_DMA_NONINCR_OPCODE_VALUE, clc56f.NVC56F_DMA_IMMD_OPCODE_VALUE)
  # GPFIFO entry: GET 31:2 + GET_HI 7:0 of the second dword, LEVEL bit 9 and LENGTH 30:10 of the second dword
  e = G.gpfifo_entry(0xAB_CDEF_1234, 0x155)
  assert (e & 0xFFFFFFFC) | ((e >> 32) & 0xFF) << 32 == 0xAB_CDEF_1234
  assert (e >> (32 + R["NVC56F_GP_ENTRY1_LENGTH"][1])) & 0x1FFFFF == 0x155 and (e >> (32 + R["NVC56F_GP_ENTRY1_LEVEL"][1])) & 1
  copy = {"LAUNCH_DMA": (G.COPY_LAUNCH_DMA, gpu.COPY_LAUNCH_DMA), "OFFSET_IN_UPPER": (G.COPY_OFFSET_IN_UPPER, gpu.COPY_OFFSET_IN_UPPER),
          "LINE_LENGTH_IN": (G.COPY_LINE_LENGTH_IN, gpu.COPY_LINE_LENGTH_IN), "SET_SEMAPHORE_A": (None, gpu.COPY_SET_SEMAPHORE_A)}
  for name, (d, m) in copy.items():
    assert m == getattr(clc8b5, f"NVC8B5_{name}") and d in (None, m), name
  assert (clc8b5.NVC8B5_OFFSET_IN_LOWER, clc8b5.NVC8B5_OFFSET_OUT_UPPER, clc8b5.NVC8B5_OFFSET_OUT_LOWER) == \
    tuple(G.COPY_OFFSET_IN_UPPER + 4 * i for i in (1, 2, 3))
  assert G.LAUNCH_DMA_NON_PIPELINED == clc8b5.NVC8B5_LAUNCH_DMA_DATA_TRANSFER_TYPE_NON_PIPELINED
  assert G.LAUNCH_DMA_SRC_PITCH == 1 << R8["NVC8B5_LAUNCH_DMA_SRC_MEMORY_LAYOUT"][1]
  assert G.LAUNCH_DMA_DST_PITCH == 1 << R8["NVC8B5_LAUNCH_DMA_DST_MEMORY_LAYOUT"][1]
