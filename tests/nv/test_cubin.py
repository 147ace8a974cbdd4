"""The hardware path of code loading: cubins parsed for their .nv.info attributes (a synthetic ELF, and ptxas's own
output when ptxas is there), PTX compiled by nvJitLink/ptxas for a GPU that runs SASS, and the errors when neither
compiler is there or a cubin needs what the loader does not handle."""
import os
import struct
import sys

import numpy as np
import pytest

import hcq
from hcq.compiler.backend.cubin import PTXCompiler
from hcq.config import Config, from_env
from hcq.drivers.nv import open_device
from hcq.drivers.nv.demo import VADD_PTX
from hcq.drivers.nv.program import EIATTR_KPARAM_INFO, EIATTR_PARAM_CBANK, EIATTR_REGCOUNT, cubin_kernels
from hcq.mockgpu import mock_nv_os


def elf(sections: list[tuple[str, int, bytes]]) -> bytes:
  """A 64-bit little-endian ELF (e_machine EM_CUDA) with the given (name, type, data) sections."""
  names = b"\0" + b"".join(n.encode() + b"\0" for n, _, _ in sections) + b".shstrtab\0"
  secs = [("", 0, b"")] + sections + [(".shstrtab", 3, names)]
  body, offsets, name_off = bytearray(), [], {}
  pos = 1
  for n, _, _ in sections + [(".shstrtab", 3, b"")]:
    name_off[n] = pos
    pos += len(n) + 1
  for _, t, data in secs:
    offsets.append(64 + len(body))
    if t != 8: body += data
  shoff = 64 + len(body)
  hdr = b"\x7fELF" + bytes([2, 1, 1]) + bytes(9) + struct.pack("<HHIQQQIHHHHHH", 2, 190, 1, 0, 0, shoff, 0, 64, 0, 0, 64,
                                                                      len(secs), len(secs) - 1)
  table = b"".join(struct.pack("<IIQQQQIIQQ", name_off.get(n, 0) if n else 0, t, 0, 0, off, len(d), 0, 0, 1, 0)
                   for (n, t, d), off in zip(secs, offsets))
  return hdr + bytes(body) + table


def sval(attr, data): return bytes([4, attr]) + struct.pack("<H", len(data)) + data


def synthetic_cubin() -> bytes:
  strtab = b"\0k\0"
  symtab = bytes(24) + struct.pack("<IBBHQQ", 1, 0x12, 0, 1, 0, 64)      # symbol 1: "k"
  info = sval(EIATTR_REGCOUNT, struct.pack("<II", 1, 40))
  kinfo = (sval(EIATTR_KPARAM_INFO, struct.pack("<IHHI", 0, 1, 8, (4 << 18) | 0xF000)) +
           sval(EIATTR_KPARAM_INFO, struct.pack("<IHHI", 0, 0, 0, (8 << 18) | 0xF000)) +
           sval(EIATTR_PARAM_CBANK, struct.pack("<IHH", 2, 0x210, 12)))
  return elf([(".strtab", 3, strtab), (".symtab", 2, symtab), (".nv.info", 0x70000000, info),
              (".nv.info.k", 0x70000000, kinfo), (".text.k", 1, b"\x00" * 64), (".nv.shared.k", 8, bytes(1024))])


def test_a_cubins_attributes_give_the_parameter_layout_registers_and_shared_memory():
  (k, code), = cubin_kernels(synthetic_cubin(), "test").values()
  assert k.name == "k" and len(code) == 64
  assert [(p.offset, p.size) for p in k.params] == [(0, 8), (8, 4)]
  assert (k.param_base, k.registers, k.shared) == (0x210, 40, 1024)


def test_a_cubin_with_relocations_is_refused_by_name():
  bad = elf([(".text.k", 1, bytes(16)), (".rela.text.k", 4, bytes(24))])
  with pytest.raises(hcq.DeviceError, match=r"needs \.rela\.text\.k .*does not handle yet"):
    cubin_kernels(bad, "test")


@pytest.fixture(scope="module")
def ptxas_dir():
  """The folder of NVIDIA's ptxas, fetched from its pinned pip wheel like the other reference tools (skips, saying why,
  where it cannot be had)."""
  sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "backend"))
  from ptxas_tool import ToolUnavailable, ptxas_path
  try: return os.path.dirname(ptxas_path(from_env().cache_dir))
  except ToolUnavailable as e: pytest.skip(f"no ptxas: {e}")


def _sass_device(**cfg):
  """The driver told its GPU runs SASS (as on hardware), over the mock: loads compile PTX to cubins."""
  os_ = mock_nv_os(Config(**cfg))
  dev = open_device("RM", 0, os_, os_.config, label="RM+NV:0")
  dev.owned_os = os_
  return dev


def test_ptx_without_a_compiler_is_loaded_as_ptx_and_the_reason_names_both_tools(monkeypatch):
  monkeypatch.setattr(PTXCompiler, "nvjitlink", lambda self: None)
  with _sass_device(exec_path="/nonexistent") as dev:
    prog = dev.load(VADD_PTX)
    assert "needs nvJitLink" in prog.kernel.no_sass and "or ptxas" in prog.kernel.no_sass
    assert dev.os.memview(prog.code_va, 8) == b"PTXENTRY"        # the program address is the PTX record
    # on a GPU that runs SASS the launch would stop (Xid 13): its error names the kernel without SASS and why
    bad = dev.load(VADD_PTX.replace(b"ret;", b"frobnicate.b32 %r1, %r1;\nret;", 1))
    buf = dev.alloc(1024)
    with pytest.raises(hcq.QueueError, match=r"kernel vadd was loaded without SASS, which a GPU that runs SASS cannot "
                                             r"execute \(.*needs nvJitLink"):
      bad(buf, buf, buf, 256, global_size=1, local_size=256, wait=True)


def test_ptx_is_compiled_by_ptxas_the_cubin_loaded_and_its_ptx_kept_beside_it(ptxas_dir):
  with _sass_device(exec_path=ptxas_dir) as dev:
    prog = dev.load(VADD_PTX, "vadd")
    k = prog.kernel
    assert [(p.offset, p.size) for p in k.params] == [(0, 8), (8, 8), (16, 8), (24, 4)]
    assert prog.param_base == 0x210 and 0 < k.registers <= 255 and k.no_sass is None
    # the program address holds SASS; the 16 bytes before it point at the kernel's PTX record (as a fatbin keeps
    # PTX beside SASS): a GPU that runs PTX (the mock) runs the kernel from there
    head = bytes(dev.os.memview(prog.code_va - 16, 24))
    assert head[:8] == b"PTXENTRY" and head[16:24] != b"PTXENTRY"
    record = int.from_bytes(head[8:16], "little")
    assert bytes(dev.os.memview(record, 8)) == b"PTXENTRY"
    a, b, out = dev.alloc(1024), dev.alloc(1024), dev.alloc(1024)
    dev.copyin(a, np.arange(256, dtype=np.float32).tobytes())
    dev.copyin(b, np.ones(256, np.float32).tobytes())
    prog(a, b, out, 256, global_size=1, local_size=256, wait=True)
    assert np.array_equal(np.frombuffer(dev.copyout(out), np.float32), np.arange(256, dtype=np.float32) + 1)


def test_ptx_is_compiled_once_per_text_for_a_sass_gpu(monkeypatch):
  calls = []
  def fake_compile(self, ptx, arch):
    calls.append((bytes(ptx), arch))
    return synthetic_cubin()
  monkeypatch.setattr(PTXCompiler, "compile", fake_compile)
  ptx = b".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k(.param .u64 a, .param .u32 n) { ret; }\n"
  with _sass_device() as dev:
    first = dev.load(ptx, "k")
    second = dev.load(ptx, "k")
    assert len(calls) == 1 and first.code_va == second.code_va
    dev.load(ptx + b"\n// another text\n", "k")
    assert len(calls) == 2


def _section_header_offset(image: bytes, index: int) -> int:
  shoff, = struct.unpack_from("<Q", image, 0x28)
  return shoff + 64 * index


def test_a_nobits_shared_section_gives_its_size_without_allocating_it():
  image = bytearray(synthetic_cubin())
  # .nv.shared.k is section 6 (after the null section and five others): its sh_size (offset 32 in the header)
  struct.pack_into("<Q", image, _section_header_offset(image, 6) + 32, 1 << 62)
  (k, _), = cubin_kernels(bytes(image), "test").values()
  assert k.shared == 1 << 62


def test_an_attribute_cut_at_the_end_of_nv_info_is_a_device_error_naming_the_section():
  strtab = b"\0k\0"
  symtab = bytes(24) + struct.pack("<IBBHQQ", 1, 0x12, 0, 1, 0, 64)
  info = sval(EIATTR_REGCOUNT, struct.pack("<II", 1, 40)) + bytes([4, EIATTR_REGCOUNT, 8])   # size's 2nd byte cut
  image = elf([(".strtab", 3, strtab), (".symtab", 2, symtab), (".nv.info", 0x70000000, info),
               (".text.k", 1, bytes(64))])
  with pytest.raises(hcq.DeviceError, match=r"test: .*\.nv\.info.* cut"):
    cubin_kernels(image, "test")
  image = elf([(".nv.info.k", 0x70000000, sval(EIATTR_KPARAM_INFO, bytes(12))[:-3]), (".text.k", 1, bytes(64))])
  with pytest.raises(hcq.DeviceError, match=r"test: .*\.nv\.info\.k.* cut"):
    cubin_kernels(image, "test")


def test_a_section_header_size_below_64_is_a_device_error():
  image = bytearray(synthetic_cubin())
  struct.pack_into("<H", image, 0x3A, 40)
  with pytest.raises(hcq.DeviceError, match="test: .*section header size 40"):
    cubin_kernels(bytes(image), "test")


def _fuzz(image: bytes, seed: int, n: int = 200) -> None:
  import random
  rng = random.Random(seed)
  for i in range(n):
    data = bytearray(image)
    if i % 4 == 3: data = data[:rng.randrange(len(data))]          # a truncation
    else:
      for _ in range(rng.randint(1, 8)):                            # byte flips
        pos = rng.randrange(len(data))
        data[pos] ^= 1 << rng.randrange(8) if rng.random() < 0.5 else rng.randrange(1, 256)
    try: cubin_kernels(bytes(data), f"fuzz {seed}/{i}")
    except hcq.HCQError: pass


def test_corrupt_synthetic_cubins_give_hcq_errors_only():
  _fuzz(synthetic_cubin(), 1)


def test_corrupt_ptxas_cubins_give_hcq_errors_only(ptxas_dir):
  cubin = PTXCompiler(Config(exec_path=ptxas_dir)).compile(VADD_PTX, "sm_90")
  assert cubin_kernels(cubin, "ptxas")
  _fuzz(cubin, 2)
