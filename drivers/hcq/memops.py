"""Queue-program elements that drive another device through memory: what a GPU queue does to post work to a NIC and
to wait for the NIC's completion, with no CPU in between.

A NIC's work request is memory writes (the work-queue entry in the send queue, its bookkeeping) followed by one
doorbell store into the NIC's BAR; its completion is a word in the completion queue that changes (a valid or phase bit,
a status) and is acknowledged by another doorbell store. A GPU queue does the same with three elements:

  write(addr, data)           INS ("mem_write", void)    src (addr, dword...): store the dwords at addr, in order
  store64(addr, value)        INS ("mem_store64", void)  src (addr, value): one 64-bit store (a doorbell must not
                                                          arrive in two halves)
  wait_eq(addr, ref, mask)    INS ("mem_wait_eq", void)  src (addr, ref, mask): wait until (mem32[addr] & mask) == ref
  wait_ge(addr, ref)          INS ("mem_wait_ge", void)  src (addr, ref): wait until mem32[addr] >= ref (a counter
                                                          another device writes: an arrival flag)

Each vendor turns them into packets in its engines' tables (AMD PM4: WRITE_DATA, COPY_DATA of a 64-bit immediate, WAIT_REG_MEM
with the == function: drivers/amd/packets.py); an engine that cannot do one refuses it when the program is built. A
wait on the device is bounded like every other: the submission's timeline value is what the host waits for, with the
device's timeout (runtime.py)."""
from __future__ import annotations

import struct

from ...compiler.ir import Ops, UOp, UPat, dtypes
from ...errors import DeviceError

WRITE, STORE64, WAIT_EQ, WAIT_GE = "mem_write", "mem_store64", "mem_wait_eq", "mem_wait_ge"


def _c(x: int) -> UOp: return UOp.const(int(x), dtypes.uint64)


def write(addr: int, data: bytes) -> UOp:
  """Store data (a multiple of 4 bytes) at the 4-byte aligned device address addr."""
  if len(data) % 4 or not data or addr % 4:
    raise DeviceError(f"memory write of {len(data)} bytes at {addr:#x}: needs whole dwords at a 4-byte aligned address")
  return UOp(Ops.INS, (_c(addr), *[_c(w) for w in struct.unpack(f"<{len(data) // 4}I", data)]), (WRITE, dtypes.void))


def store64(addr: int, value: int) -> UOp:
  if addr % 8: raise DeviceError(f"64-bit store at {addr:#x}: the address is not 8-byte aligned")
  return UOp(Ops.INS, (_c(addr), _c(value)), (STORE64, dtypes.void))


def wait_eq(addr: int, ref: int, mask: int = 0xFFFFFFFF) -> UOp:
  if addr % 4: raise DeviceError(f"wait on {addr:#x}: the address is not 4-byte aligned")
  return UOp(Ops.INS, (_c(addr), _c(ref & mask), _c(mask)), (WAIT_EQ, dtypes.void))


def wait_ge(addr: int, ref: int) -> UOp:
  if addr % 4: raise DeviceError(f"wait on {addr:#x}: the address is not 4-byte aligned")
  return UOp(Ops.INS, (_c(addr), _c(ref & 0xFFFFFFFF)), (WAIT_GE, dtypes.void))


class MPat:
  """UPats of the elements, for a vendor's packet table."""
  @staticmethod
  def write(name="ins"): return UPat(Ops.INS, arg=(WRITE, dtypes.void), src=(UPat.var("addr"),), allow_any_len=True, name=name)
  @staticmethod
  def store64(): return UPat(Ops.INS, arg=(STORE64, dtypes.void), src=(UPat.var("addr"), UPat.var("value")))
  @staticmethod
  def wait_eq(): return UPat(Ops.INS, arg=(WAIT_EQ, dtypes.void), src=(UPat.var("addr"), UPat.var("ref"), UPat.var("mask")))
  @staticmethod
  def wait_ge(): return UPat(Ops.INS, arg=(WAIT_GE, dtypes.void), src=(UPat.var("addr"), UPat.var("ref")))
