"""A tiny code-object loader that drives mockgpu.amd.emu.dispatch() directly (no KFD, no PM4).

It loads the PT_LOAD segments of a clang-19 HSA code object (gfx1100, gfx1200 or gfx942) into host memory, reads the kernel descriptor
(LLVM AMDGPUUsage "Kernel Descriptor") and the NT_AMDGPU_METADATA note (msgpack) for the arguments, lays out the
kernargs including the COV5 hidden arguments, and builds the user SGPRs from kernel_code_properties.
"""
from __future__ import annotations

import struct

import msgpack
import numpy as np

from hcq.mockgpu.amd.emu import GPUMemory, ScratchSetup, dispatch


class HostBuffers:
  """Host allocations registered with a GPUMemory (GPU VA == host VA); kept alive by this object."""

  def __init__(self, memory: GPUMemory):
    self.memory = memory
    self.keep = []

  def alloc(self, nbytes: int, align: int = 256) -> tuple[int, np.ndarray]:
    raw = np.zeros(nbytes + align + 64, np.uint8)
    addr = raw.ctypes.data
    pad = (-addr) % align
    view = raw[pad:pad + nbytes]
    self.memory.add_range(addr + pad, max(nbytes, 1))
    self.keep.append(raw)
    return addr + pad, view

  def array(self, arr: np.ndarray) -> tuple[int, np.ndarray]:
    arr = np.ascontiguousarray(arr)
    addr, view = self.alloc(arr.nbytes)
    out = view.view(arr.dtype).reshape(arr.shape)
    out[...] = arr
    return addr, out


def _parse_elf(blob: bytes):
  if blob[:4] != b"\x7fELF": raise ValueError("not an ELF file")
  (e_phoff, e_shoff) = struct.unpack_from("<QQ", blob, 0x20)
  e_phentsize, e_phnum, e_shentsize, e_shnum, e_shstrndx = struct.unpack_from("<HHHHH", blob, 0x36)
  segs = []
  for i in range(e_phnum):
    p_type, p_flags, p_offset, p_vaddr, p_paddr, p_filesz, p_memsz, p_align = \
      struct.unpack_from("<IIQQQQQQ", blob, e_phoff + i * e_phentsize)
    segs.append((p_type, p_offset, p_vaddr, p_filesz, p_memsz))
  sections = []
  for i in range(e_shnum):
    sh = struct.unpack_from("<IIQQQQIIQQ", blob, e_shoff + i * e_shentsize)
    sections.append(sh)
  shstr = sections[e_shstrndx]
  def sname(off):
    start = shstr[4] + off
    return blob[start:blob.index(b"\0", start)].decode()
  named = {sname(s[0]): s for s in sections}
  return segs, named, sections


def _symbols(blob, named, sections):
  syms = {}
  for tab in (".symtab", ".dynsym"):
    if tab not in named: continue
    sh = named[tab]
    strtab = sections[sh[6]]
    for off in range(sh[4], sh[4] + sh[5], 24):
      st_name, st_info, st_other, st_shndx, st_value, st_size = struct.unpack_from("<IBBHQQ", blob, off)
      start = strtab[4] + st_name
      syms[blob[start:blob.index(b"\0", start)].decode()] = (st_value, st_size)
  return syms


def _metadata(blob, named):
  sh = named[".note"]
  off, end = sh[4], sh[4] + sh[5]
  while off < end:
    namesz, descsz, ntype = struct.unpack_from("<III", blob, off)
    name = blob[off + 12:off + 12 + namesz]
    desc_off = off + 12 + ((namesz + 3) & ~3)
    if ntype == 32 and name.startswith(b"AMDGPU"):
      return msgpack.unpackb(blob[desc_off:desc_off + descsz], raw=False)
    off = desc_off + ((descsz + 3) & ~3)
  raise ValueError("no NT_AMDGPU_METADATA note")


class Kernel:
  def __init__(self, bufs: HostBuffers, blob: bytes, name: str | None = None):
    segs, named, sections = _parse_elf(blob)
    meta = _metadata(blob, named)
    kernels = meta["amdhsa.kernels"]
    self.meta = next(k for k in kernels if name is None or k[".name"] == name)
    self.name = self.meta[".name"]
    span = max(v + m for t, o, v, f, m in segs if t == 1)
    self.base, image = bufs.alloc(span, 4096)
    for t, o, v, f, m in segs:
      if t == 1: image[v:v + f] = np.frombuffer(blob, np.uint8, f, o)
    syms = _symbols(blob, named, sections)
    kd_off = syms[self.meta[".symbol"]][0]
    kd = bytes(image[kd_off:kd_off + 64])
    self.group_fixed, self.private_fixed, self.kernarg_size = struct.unpack_from("<III", kd, 0)
    entry = struct.unpack_from("<q", kd, 16)[0]
    self.rsrc3, self.rsrc1, self.rsrc2 = struct.unpack_from("<III", kd, 44)
    self.props = struct.unpack_from("<H", kd, 56)[0]
    # the target from the ELF header's e_flags (EF_AMDGPU_MACH); the wave size from the kernel descriptor
    # (kernel_code_properties ENABLE_WAVEFRONT_SIZE32, bit 10, on gfx10+; gfx9 runs wave64 only)
    from hcq.compiler.isa.amd.codeobject import MACH_NAMES
    self.arch = MACH_NAMES[struct.unpack_from("<I", blob, 0x30)[0] & 0xFF]
    self.wave_size = 64 if self.arch.startswith("gfx9") or not self.props & 0x400 else 32
    self.pgm = self.base + kd_off + entry
    self.bufs = bufs

  def __call__(self, *args, grid=(1, 1, 1), block=(1, 1, 1), dynamic_lds=0, budget=50_000_000, scratch_base=None):
    """args: in order of the explicit arguments: ints (addresses for pointers) or numpy scalars."""
    size = max(self.meta[".kernarg_segment_size"], 8)
    ka_addr, ka = self.bufs.alloc(size, 64)
    explicit = [a for a in self.meta[".args"] if not a[".value_kind"].startswith("hidden_")]
    if len(explicit) != len(args): raise TypeError(f"{self.name} takes {len(explicit)} arguments")
    for a, v in zip(explicit, args):
      off, sz = a[".offset"], a[".size"]
      if isinstance(v, np.generic): raw = v.tobytes()
      elif isinstance(v, float): raw = struct.pack("<f" if sz == 4 else "<d", v)
      else: raw = int(v).to_bytes(sz, "little", signed=int(v) < 0)
      ka[off:off + sz] = np.frombuffer(raw[:sz].ljust(sz, b"\0"), np.uint8)
    g = [int(x) for x in grid]
    b = [int(x) for x in block]
    limit = self.meta.get(".max_flat_workgroup_size", 1024)
    if b[0] * b[1] * b[2] > limit:   # clang compiles for at most this many (256 unless reqd_work_group_size says)
      raise ValueError(f"{self.name}: work-group of {b[0] * b[1] * b[2]} threads exceeds its "
                       f".max_flat_workgroup_size {limit}")
    dims = 3 if g[2] > 1 or b[2] > 1 else 2 if g[1] > 1 or b[1] > 1 else 1
    hidden = {"hidden_block_count_x": (g[0], 4), "hidden_block_count_y": (g[1], 4), "hidden_block_count_z": (g[2], 4),
              "hidden_group_size_x": (b[0], 2), "hidden_group_size_y": (b[1], 2), "hidden_group_size_z": (b[2], 2),
              "hidden_remainder_x": (0, 2), "hidden_remainder_y": (0, 2), "hidden_remainder_z": (0, 2),
              "hidden_grid_dims": (dims, 2), "hidden_dynamic_lds_size": (dynamic_lds, 4)}
    for a in self.meta[".args"]:
      kind = a[".value_kind"]
      if kind in hidden:
        val, sz = hidden[kind]
        ka[a[".offset"]:a[".offset"] + sz] = np.frombuffer(val.to_bytes(sz, "little"), np.uint8)
    # user SGPRs in the order of kernel_code_properties (LLVM AMDGPUUsage "Initial Kernel Execution State")
    user = []
    if self.props & 1: user += [0, 0, 0, 0]               # private segment buffer (unused with flat scratch)
    if self.props & 2:                                     # dispatch ptr: a zeroed AQL packet with the sizes
      dp_addr, dp = self.bufs.alloc(64, 64)
      struct.pack_into("<HHHHHHIIII", dp, 0, 0, dims, b[0], b[1], b[2], 0, g[0] * b[0], g[1] * b[1], g[2] * b[2],
                       self.private_fixed)
      user += [dp_addr & 0xFFFFFFFF, dp_addr >> 32]
    if self.props & 4: user += [0, 0]                      # queue ptr
    if self.props & 8: user += [ka_addr & 0xFFFFFFFF, ka_addr >> 32]
    if self.props & 16: user += [0, 0]                     # dispatch id
    if self.props & 32: user += [0, 0]                     # flat scratch init (architected on gfx11)
    if self.props & 64: user += [self.private_fixed]
    lds = self.group_fixed + dynamic_lds
    return dispatch(self.bufs.memory, pgm_addr=self.pgm, rsrc1=self.rsrc1, rsrc2=self.rsrc2, rsrc3=self.rsrc3,
                    user_sgprs=user, grid=tuple(g), block=tuple(b), lds_bytes=lds,
                    scratch=ScratchSetup(scratch_base, self.private_fixed), instruction_budget=budget,
                    arch=self.arch, wave_size=self.wave_size)


def run_corpus_kernel(bufs: HostBuffers, prog: Kernel, k, kernels, seed: int = 0) -> None:
  """Run corpus kernel k (tests/fixtures/opencl/kernels.py) once on inputs made from seed and check its outputs
  against its numpy reference. kernels: that module (for its Scalar argument type)."""
  data = k.inputs(seed=seed)
  args, outputs = [], {}
  for a in k.args:
    if isinstance(a, kernels.Scalar):
      args.append(data[a.name])
      continue
    addr, view = bufs.array(data[a.name])
    args.append(addr)
    outputs[a.name] = view
  prog(*args, grid=k.groups, block=k.local_size)
  k.check(outputs, data)
