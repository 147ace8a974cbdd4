"""Run a few instructions, assembled by llvm-mc-19 for a target, on the emulator (one work-group) and read back two
VGPRs per lane: the harness of the instruction tests (test_instructions*.py).

The kernel gets s[0:1] = output buffer, s[2:3] = input buffer, s4..s7 = scalar inputs; the prologue loads the four
per-lane inputs into v10..v13 (input k of lane l at in[k * lanes + l]); the epilogue stores v1 and v3 of every lane
(v1 at out[0:n], v3 at out[n:2 * n] by work-item id, n = max(threads, lanes)) under the EXEC the wave started with
(saved in s30 / s[30:31] by the prologue: the body must not use them).
"""
from __future__ import annotations

import os
import subprocess
import tempfile

import numpy as np

from hcq.mockgpu.amd.emu import GPUMemory, dispatch

from .loader import HostBuffers, _parse_elf

# per target: the wave size, and the prologue/epilogue in its own syntax ({o1}..{o3}: input byte offsets 1-3)
TARGETS = {
  "gfx1100": (32, """
s_mov_b32 s30, exec_lo
v_lshlrev_b32 v2, 2, v0
global_load_b32 v10, v2, s[2:3]
global_load_b32 v11, v2, s[2:3] offset:{o1}
global_load_b32 v12, v2, s[2:3] offset:{o2}
global_load_b32 v13, v2, s[2:3] offset:{o3}
s_waitcnt vmcnt(0)
v_mov_b32 v1, 0
v_mov_b32 v3, 0
""", """
s_mov_b32 exec_lo, s30
v_mbcnt_lo_u32_b32 v2, -1, 0
v_lshlrev_b32 v2, 2, v2
global_store_b32 v2, v1, s[0:1]
global_store_b32 v2, v3, s[0:1] offset:{o1}
s_endpgm
"""),
  "gfx1200": (32, """
s_mov_b32 s30, exec_lo
v_lshlrev_b32 v2, 2, v0
global_load_b32 v10, v2, s[2:3]
global_load_b32 v11, v2, s[2:3] offset:{o1}
global_load_b32 v12, v2, s[2:3] offset:{o2}
global_load_b32 v13, v2, s[2:3] offset:{o3}
s_wait_loadcnt 0
v_mov_b32 v1, 0
v_mov_b32 v3, 0
""", """
s_mov_b32 exec_lo, s30
v_and_b32 v2, 0x3ff, v0
v_lshlrev_b32 v2, 2, v2
global_store_b32 v2, v1, s[0:1]
global_store_b32 v2, v3, s[0:1] offset:{o1}
s_endpgm
"""),
  "gfx942": (64, """
s_mov_b64 s[30:31], exec
v_lshlrev_b32 v2, 2, v0
global_load_dword v10, v2, s[2:3]
global_load_dword v11, v2, s[2:3] offset:{o1}
global_load_dword v12, v2, s[2:3] offset:{o2}
global_load_dword v13, v2, s[2:3] offset:{o3}
s_waitcnt vmcnt(0)
v_mov_b32 v1, 0
v_mov_b32 v3, 0
""", """
s_mov_b64 exec, s[30:31]
v_and_b32 v2, 0x3ff, v0
v_lshlrev_b32 v2, 2, v2
global_store_dword v2, v1, s[0:1]
global_store_dword v2, v3, s[0:1] offset:{o1}
s_endpgm
"""),
}


def assemble(text: str, mcpu: str = "gfx1100") -> bytes:
  """The .text bytes of the object llvm-mc-19 assembles for mcpu (branches to labels resolved)."""
  with tempfile.TemporaryDirectory() as tmp:
    obj = os.path.join(tmp, "a.o")
    out = subprocess.run(["llvm-mc-19", "-triple=amdgcn-amd-amdhsa", f"-mcpu={mcpu}", "-filetype=obj", "-o", obj],
                         input=text, capture_output=True, text=True)
    if out.returncode != 0 or "error" in out.stderr: raise AssertionError(out.stderr)
    with open(obj, "rb") as f: blob = f.read()
  _, named, _ = _parse_elf(blob)
  sh = named[".text"]
  return blob[sh[4]:sh[4] + sh[5]]


def run(body: str, mcpu: str, ins=None, scalars=(0, 0, 0, 0), threads: int | None = None, memory=None,
        grid=(1, 1, 1)):
  """Run PROLOGUE + body + EPILOGUE as `grid` work-groups of `threads` (default: one full wave) work-items; returns
  (v1, v3) of every lane as u32 arrays (lanes of threads that do not exist read 0; with several work-groups, every
  group stores there). memory: u32 words placed after the four per-lane inputs (at byte offset 16 * n of s[2:3]);
  when given, (v1, v3, those words after the run) come back."""
  lanes, pre, post = TARGETS[mcpu]
  threads = lanes if threads is None else threads
  n = max(lanes, threads)
  ins = [np.zeros(n, np.uint32) if x is None else np.asarray(x).view(np.uint32) for x in (ins or [None] * 4)]
  ins += [np.zeros(n, np.uint32)] * (4 - len(ins))
  offs = {f"o{k}": 4 * n * k for k in (1, 2, 3)}
  code = assemble(pre.format(**offs) + body + post.format(**offs), mcpu)
  bufs = HostBuffers(GPUMemory())
  pc, cbuf = bufs.alloc(len(code) + 64)
  cbuf[:len(code)] = np.frombuffer(code, np.uint8)
  extra = np.zeros(1, np.uint32) if memory is None else np.asarray(memory, np.uint32)
  pin, inp = bufs.array(np.concatenate(ins + [extra]).astype(np.uint32))
  pout, out = bufs.array(np.zeros(2 * n, np.uint32))
  user = [pout & 0xFFFFFFFF, pout >> 32, pin & 0xFFFFFFFF, pin >> 32] + [int(s) & 0xFFFFFFFF for s in scalars]
  # rsrc1: 32 VGPRs (granule of 8)
  # rsrc2: 8 user SGPRs, work-group ids X, Y, Z after them (gfx12 also has them in TTMP9/TTMP7)
  # rsrc3 (gfx942): ACCUM_OFFSET 3, AccVGPRs from unified register 16 on: v0..v15 and a0..a15 in the 32 VGPRs
  dispatch(bufs.memory, pgm_addr=pc, rsrc1=3, rsrc2=8 << 1 | 7 << 7, rsrc3=3 if mcpu == "gfx942" else 0,
           user_sgprs=user, grid=tuple(grid), block=(threads, 1, 1), lds_bytes=4096, instruction_budget=1_000_000,
           arch=mcpu)
  if memory is not None: return out[:n].copy(), out[n:].copy(), inp[4 * n:].copy()
  return out[:n].copy(), out[n:].copy()
