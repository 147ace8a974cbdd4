"""One tinygrad 0.14 session on hcq's mocks, in its own process (tinygrad reads DEV and its other variables at import).

  python run_client.py kfd|nv|am

DEV must be set by the caller (MOCKKFD+AMD, MOCK+NV, MOCKPCI+AMD). This folder goes first on sys.path, so that
tinygrad's `import test.mockgpu.mockgpu` finds the adapter (test/mockgpu/mockgpu.py). Prints one line per step
("STEP name ok ..."); a failure prints the traceback and exits 1."""
from __future__ import annotations

import ctypes
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.append(ROOT)       # tests.fixtures (the committed kernel corpus)

import numpy as np  # noqa: E402


def step(name: str, detail: str = "") -> None: print(f"STEP {name} ok {detail}".rstrip(), flush=True)


def _adapter():
  import tinygrad.runtime.support.hcq  # noqa: F401  (imports the adapter: DEV's interface starts with MOCK)
  from test.mockgpu import mockgpu
  mockgpu.install_late()
  return mockgpu


def _copies(devname: str, n: int = 4096):
  """Copy in, a device-to-device copy, copy out through tinygrad's HCQ allocator (its SDMA / copy-engine queues),
  and a 64-byte buffer (KFD: a sub-page allocation); returns the device."""
  from tinygrad.device import BufferSpec, Device
  dev = Device[devname]
  step("open", f"{type(dev).__name__} iface={type(dev.iface).__name__}")
  al = dev.allocator
  src = (np.arange(n, dtype=np.uint64) * 2654435761 % (1 << 32)).astype(np.uint32)
  a, b = al.alloc(n * 4), al.alloc(n * 4)
  al._copyin(a, memoryview(src).cast("B"))
  al._transfer(b, a, n * 4, src_dev=dev, dest_dev=dev)
  out = np.zeros(n, dtype=np.uint32)
  al._copyout(memoryview(out).cast("B"), b)
  if not np.array_equal(out, src): raise AssertionError(f"copy round trip differs at index {int(np.argmax(out != src))}")
  small = al.alloc(64, BufferSpec(nolru=True))
  al._copyin(small, memoryview(bytearray(range(64))))
  back = bytearray(64)
  al._copyout(memoryview(back), small)
  if bytes(back) != bytes(range(64)): raise AssertionError("64-byte buffer round trip differs")
  step("copies", f"{n * 4} bytes in, device-to-device, out; 64-byte buffer")
  return dev


def _put(dev, arr):
  buf = dev.allocator.alloc(arr.nbytes)
  dev.allocator._copyin(buf, memoryview(np.ascontiguousarray(arr)).cast("B"))
  return buf


def _get(dev, buf, like):
  out = np.zeros_like(like)
  dev.allocator._copyout(memoryview(out).cast("B"), buf)
  return out


def run_amd(devname: str = "AMD") -> None:
  _adapter()
  from tinygrad.device import TinyELF
  from tinygrad.dtype import dtypes
  from tinygrad.helpers import DEV
  from tests.fixtures.opencl.kernels import KERNELS
  dev = _copies(devname)
  k = KERNELS["vadd"]
  data = k.inputs(seed=0)
  bufs = {b.name: _put(dev, data[b.name]) for b in k.buffers}
  # vadd.cl is OpenCL C (code object v5): get_global_id reads the hidden kernel arguments after the explicit ones
  # (LLVM AMDGPUUsage, "Code Object V5 Metadata": hidden_block_count_x/y/z u32 at +0x18, hidden_group_size_x/y/z u16
  # at +0x24, hidden_remainder_x/y/z u16, hidden_global_offset_x/y/z u64 at +0x40). tinygrad's own kernels use none,
  # so its argument block leaves them zero; they are passed here through its API, as 32-bit values after the three
  # 64-bit pointers (CLikeArgsState: vals follow the buffers, laid out by the program's signature).
  (gx, gy, gz), (lx, ly, lz) = k.groups, k.local_size
  hidden = (gx, gy, gz, lx | ly << 16, lz, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
  sig = tuple((f"hidden{i}", i, dtypes.uint32, ()) for i in range(len(hidden)))   # the types of the values
  prg = dev.runtime(TinyELF(k.code_object(), "vadd", DEV.target(devname), sig))
  step("program", f"{type(prg).__name__} vadd.hsaco loaded at {prg.prog_addr:#x}")
  prg(*[bufs[b.name] for b in k.buffers], global_size=k.groups, local_size=k.local_size, vals=hidden, wait=True)
  outs = {b.name: _get(dev, bufs[b.name], data[b.name]) for b in k.outputs}
  k.check(outs, data)
  step("kernel", f"vadd over {k.buffers[0].count} floats matches numpy")


def run_nv() -> None:
  _adapter()
  dev = _copies("NV")
  n = 1024
  # tinygrad's NV program on a MOCK interface takes PTX (ops_nv.NVProgram: "For MOCKGPU, the lib is PTX code")
  ptx = PTX_VADD
  a_np = np.arange(n, dtype=np.float32)
  b_np = (np.arange(n, dtype=np.float32) * 0.5 + 3.0)
  a, b, c = _put(dev, a_np), _put(dev, b_np), _put(dev, np.zeros(n, dtype=np.float32))
  from tinygrad.device import TinyELF
  from tinygrad.helpers import DEV
  prg = dev.runtime(TinyELF(ptx.encode(), "vadd", DEV.target("NV"), ()))
  step("program", type(prg).__name__)
  prg(c, a, b, global_size=(n // 64, 1, 1), local_size=(64, 1, 1), wait=True)
  out = _get(dev, c, a_np)
  if not np.array_equal(out, a_np + b_np):
    i = int(np.argmax(out != a_np + b_np))
    raise AssertionError(f"PTX vadd: c[{i}] = {out[i]}, numpy says {(a_np + b_np)[i]}")
  step("kernel", f"PTX vadd over {n} floats matches numpy")


# the block size is baked in (64), as tinygrad's PTX renderer does: tinygrad does not write blockDim into constant
# bank 0 (ops_nv.NVComputeQueue.exec), where SASS reads %ntid, so its kernels never read %ntid
PTX_VADD = """
.version 7.8
.target sm_89
.address_size 64
.visible .entry vadd(.param .u64 c, .param .u64 a, .param .u64 b)
{
  .reg .b32 %r<6>;
  .reg .b64 %rd<11>;
  .reg .f32 %f<4>;
  ld.param.u64 %rd1, [c];
  ld.param.u64 %rd2, [a];
  ld.param.u64 %rd3, [b];
  mov.u32 %r1, %ctaid.x;
  mov.u32 %r3, %tid.x;
  mad.lo.s32 %r4, %r1, 64, %r3;
  mul.wide.s32 %rd4, %r4, 4;
  add.s64 %rd5, %rd2, %rd4;
  add.s64 %rd6, %rd3, %rd4;
  add.s64 %rd7, %rd1, %rd4;
  ld.global.f32 %f1, [%rd5];
  ld.global.f32 %f2, [%rd6];
  add.f32 %f3, %f1, %f2;
  st.global.f32 [%rd7], %f3;
  ret;
}
"""


def _mock_diagnosis() -> None:
  """What the mock refused (its PSP's refusals, the firmware the adapter substituted): printed after a failure."""
  import tg_adapter
  from tg_adapter import system as tg_system
  for sub in tg_system.SUBSTITUTED: print(f"MOCK firmware substituted: {sub[0]} (tinygrad pins {sub[1][:16]}..., package {sub[2][:16]}...)")
  for dev in getattr(tg_adapter._os, "devices", []):
    psp = getattr(dev, "psp", None)
    if psp is not None:
      print(f"MOCK PSP bootloader loaded {[hex(c) for c in psp.bl_loaded]} sOS alive {psp.sos_alive}")
      for why in psp.refused: print(f"MOCK PSP refused: {why}")
  kernel_log = getattr(tg_adapter._os, "kernel_log", None)
  for line in (kernel_log() if kernel_log else []): print(f"MOCK kernel log: {line}")
  sys.stdout.flush()


def main() -> int:
  what = sys.argv[1]
  try:
    if what in ("kfd", "am"): run_amd()
    elif what == "nv": run_nv()
    else: raise SystemExit(f"unknown scenario {what!r}")
  except BaseException:
    import traceback
    traceback.print_exc()
    _mock_diagnosis()
    sys.stdout.flush()
    os._exit(1)
  sys.stdout.flush()
  os._exit(0)      # no atexit/finalizers: the mock's threads and memory go with the process


if __name__ == "__main__":
  sys.exit(main())
