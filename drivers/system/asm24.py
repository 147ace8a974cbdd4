"""The ASM24xx (ASM2464PD) USB4/Thunderbolt-to-PCIe bridge with the custom firmware, over a USB transport
(drivers/system/usb.py: pyusb). This file is the bridge's vendor-request protocol, nothing above it; usbpci.py builds
PCI functions, BARs and system memory on it.

The protocol (the custom ASM24xx firmware's vendor requests, as this module documents them), all vendor control requests on endpoint 0 plus bulk
OUT 0x02 / bulk IN 0x81:
  0xE4 IN   read controller XDATA (8051 XRAM): wValue = address, wLength <= 255
  0xE5 OUT  write one XDATA byte: wValue = address, wIndex = the byte
  0xF0 OUT  issue a TLP: wValue = fmt/type | first-DW byte enables << 8, wIndex = mode (0 one TLP, 1 streaming MWr of
            N dwords whose data follows on bulk OUT, 2 streaming MRd of N dwords whose data comes on bulk IN);
            data = 12 bytes: address low, address high, value (mode 0) or dword count (modes 1, 2), little-endian
  0xF0 IN   8-byte completion: u32 data; byte 4 bits 7:5 the completion status (PCIe Table 2-34: 1 UR, 2 CRS,
            4 CA); byte 7 the transport status (nonzero: the firmware could not put the TLP on the link; retry)
  0xF2 OUT  arm the SRAM DMA engine: wValue = 512-byte sectors (bit 15: read, SRAM -> host), wIndex = first 16 KiB
            slot | number of slots << 8; the sector-padded data follows on bulk OUT (or comes on bulk IN)
  0xF3 OUT  PCIe power: wValue 1 on, 0 off; the link is up when XDATA 0xB450 (LTSSM state) reads 0x78 (L0)
Posted requests (memory writes) get no completion read; the others read 0xF0 IN. After a streaming request the
completion read gives the status of the burst (the first failing TLP's status; data = dwords done).

Errors name the bridge, the request and the PCIe address. Retries are bounded: a transport status nonzero is retried
after 1 ms up to TRANSPORT_RETRIES times (the reference's 10); a STALLed control request (refused, nothing done) up
to STALL_RETRIES times; a timed-out request that only reads is retried up to TIMEOUT_RETRIES times, one that writes
is not (it may have happened) and raises hcq.Timeout. A request that announces a bulk transfer (0xF0 modes 1 and 2,
0xF2) is never simply asked again: if the first one arrived, the firmware has queued its burst, and a second burst
would answer the next bulk transfer, another request's (wrong data); after its timeout the bulk transfer is tried
once, and only if nothing was queued (the transfer times out) is the request asked again (_announced). An unplugged
bridge raises USBGone at once and stays failed.

A request and the transfers that answer it (a TLP's completion read, an announced burst) are one sequence under the
bridge's lock: a device may be used from several threads (a timed launch reads its timestamps outside the runtime's
lock), and another thread's request between the two would take the completion or the burst (another register's
value, a burst of the wrong size).
"""
from __future__ import annotations

import collections
import struct
import threading

from ...errors import DeviceError, Timeout
from . import pcie, usbasync, usbpipeline
from .usb import USBGone, USBStall

# ids the custom firmware enumerates with, and the product strings it reports (§5.1)
BRIDGE_IDS = ((0xADD1, 0x0001), (0x3801, 0x0001))
PRODUCT_PREFIXES = ("custom", "AS2462")

VENDOR_OUT, VENDOR_IN = 0x40, 0xC0
REQ_XDATA_READ, REQ_XDATA_WRITE, REQ_TLP, REQ_SRAM_DMA, REQ_POWER = 0xE4, 0xE5, 0xF0, 0xF2, 0xF3
EP_OUT, EP_IN = 0x02, 0x81
MODE_SINGLE, MODE_STREAM_WRITE, MODE_STREAM_READ = 0, 1, 2
XDATA_READ_MAX = 255
LTSSM_STATE, LTSSM_L0 = 0xB450, 0x78

SECTOR, SLOT = 512, 16 << 10
SRAM_SLOTS = 32                         # 512 KiB of SRAM behind 0xF2
STREAM_MAX_DWORDS = 1 << 20             # one streaming request moves at most 4 MiB (the bulk buffer)

# Bulk transfers the host keeps in flight when it moves several bursts (usbpipeline.py; K of issue 33's "several bulk
# requests in flight"): 2, the depth the hardware-proven client runs on the real firmware (tinygrad 0.14
# runtime/ops_amd.py, USB copy-in: two bulk OUT transfers in flight, the next 0xF2 arm sent while one is). The firmware's
# own limit is not published; ASM24Bridge.in_flight may be set to another depth (bench/usb.py measures 1, 2 and 4).
BULK_IN_FLIGHT = 2

TRANSPORT_RETRIES, STALL_RETRIES, TIMEOUT_RETRIES = 10, 3, 3
TRANSPORT_RETRY_S = 0.001


class CompletionError(DeviceError):
  """A TLP came back with a status other than successful completion; names the request and the address."""

  def __init__(self, message: str, status: int, address: int):
    super().__init__(message)
    self.status, self.address = status, address


def describe(fmt_type: int, address: int) -> str:
  """'CfgRd1 04:00.0 register 0x010' / 'MWr64 at 0x800000000'."""
  if pcie.is_config(fmt_type):
    bus, dev, fn, reg = pcie.split_config_address(address)
    return f"{pcie.fmt_type_name(fmt_type)} {bus:02x}:{dev:02x}.{fn} register {reg:#05x}"
  return f"{pcie.fmt_type_name(fmt_type)} at {address:#x}"


def transfer_timeout_ms(timeout_s: float) -> int:
  """A USB transfer's timeout in milliseconds for a device timeout in seconds: libusb takes an unsigned int of ms
  (libusb_control_transfer, libusb_bulk_transfer), where 0 means no timeout at all, so at least 1 and at most 2^32-1."""
  return min(max(1, round(timeout_s * 1000)), 0xFFFFFFFF)


class ASM24Bridge:
  """One bridge, opened: vendor requests with retries; `counts` tallies USB transfers by kind (a benchmark's and a
  test's view of the bus load)."""

  def __init__(self, transport, name: str, sleep, timeout_ms: int = 1000, monotonic=None):
    self.usb, self.name, self._sleep, self.timeout_ms = transport, name, sleep, timeout_ms
    self._monotonic = monotonic          # the OS interface's clock: the deadlines of transfers in flight
    self.counts: collections.Counter = collections.Counter()
    self.retries: collections.Counter = collections.Counter()
    self.gone: str | None = None
    self._sequence = threading.RLock()     # a request and the transfers that answer it (module docstring)
    self.in_flight = BULK_IN_FLIGHT        # bulk transfers in flight when several bursts go at once (usbpipeline.py)
    self.sync_round_trips = 0              # synchronous transfers: the host waits for each
    self.bulk_max_in_flight = 0            # the most bulk transfers a pipeline had in flight at once
    self._queue = None

  @classmethod
  def open(cls, os, index: int = 0, timeout_ms: int | None = None) -> "ASM24Bridge":
    """The index-th bridge running the custom firmware, over any of its ids (os.usb_open: pyusb). timeout_ms: of each
    transfer; default the device timeout (config.timeout_s, HCQ_TIMEOUT), not a fixed second."""
    if timeout_ms is None: timeout_ms = transfer_timeout_ms(os.config.timeout_s)
    errors = []
    for vid, pid in BRIDGE_IDS:
      try: transport = os.usb_open(vid, pid, index, product_prefixes=PRODUCT_PREFIXES)
      except DeviceError as e:
        errors.append(str(e))
        continue
      return cls(transport, f"ASM24 bridge {vid:04x}:{pid:04x} #{index}", os.sleep, timeout_ms, os.monotonic)
    raise DeviceError(f"no ASM24xx bridge with the custom firmware #{index}: " + "; ".join(errors))

  # ---- transfers: counted, retried, failures named
  def _call(self, kind: str, fn, *args, idempotent: bool):
    if self.gone: raise USBGone(f"{self.name}: the bridge is gone ({self.gone}); reopen it")
    try: return self._attempts(kind, fn, args, idempotent)
    except USBGone as e:      # from the transfer or from the recovery between tries (the clear halt after a STALL)
      self.gone = str(e)
      raise

  def _attempts(self, kind: str, fn, args, idempotent: bool):
    stalls = timeouts = 0
    while True:
      self.counts[kind] += 1
      self.sync_round_trips += 1
      try: return fn(*args)
      except USBStall:
        if stalls >= STALL_RETRIES: raise
        stalls += 1
        self.retries["stall"] += 1
        if kind.startswith("bulk"): self.usb.clear_halt(EP_OUT if kind == "bulk_out" else EP_IN)
      except Timeout:
        if not idempotent or timeouts >= TIMEOUT_RETRIES: raise
        timeouts += 1
        self.retries["timeout"] += 1

  def control_out(self, request: int, value: int, index: int, data: bytes | None = None, idempotent: bool = False):
    return self._call("control_out", self.usb.control, VENDOR_OUT, request, value, index, data, self.timeout_ms,
                      idempotent=idempotent)

  def control_in(self, request: int, value: int, index: int, length: int) -> bytes:
    data = self._call("control_in", self.usb.control, VENDOR_IN, request, value, index, length, self.timeout_ms,
                      idempotent=True)
    if len(data) != length:
      raise DeviceError(f"{self.name}: request {request:#04x} returned {len(data)} of {length} bytes")
    return data

  def bulk_out(self, data: bytes, idempotent: bool = False) -> None:
    self._call("bulk_out", self.usb.bulk_write, EP_OUT, data, self.timeout_ms, idempotent=idempotent)

  def bulk_in(self, size: int) -> bytes:
    data = self._call("bulk_in", self.usb.bulk_read, EP_IN, size, self.timeout_ms, idempotent=False)
    if len(data) != size: raise DeviceError(f"{self.name}: bulk read returned {len(data)} of {size} bytes")
    return data

  @property
  def transfers(self) -> int: return sum(self.counts.values())

  # ---- several transfers in flight (usbasync.py, usbpipeline.py)
  def transfers_queue(self):
    """The transport's queue of transfers in flight (libusb's asynchronous API, or a synchronous pipeline)."""
    if self._queue is None:
      self._queue = usbasync.async_transfers(self.usb, *((self._monotonic,) if self._monotonic else ()))
    return self._queue

  @property
  def round_trips(self) -> int:
    """The host's waits for the bridge: one per synchronous transfer, one per wait for transfers in flight."""
    return self.sync_round_trips + (self._queue.round_trips if self._queue is not None else 0)

  def pipeline(self) -> "usbpipeline.BurstPipeline":
    """Several bursts with up to `in_flight` bulk transfers in flight; use under `with` (holds the bridge's lock)."""
    return _Locked(self._sequence, usbpipeline.BurstPipeline(self, self.in_flight, EP_OUT, VENDOR_OUT, VENDOR_IN), self)

  # ---- XDATA (the controller's 64 KiB address space: registers and the small DMA windows)
  def xdata_read(self, address: int, size: int) -> bytes:
    if address < 0 or size < 0 or address + size > 0x10000:
      raise DeviceError(f"{self.name}: XDATA read at {address:#x}+{size} is outside 64 KiB")
    out = bytearray()
    while size > len(out):
      n = min(XDATA_READ_MAX, size - len(out))
      out += self.control_in(REQ_XDATA_READ, address + len(out), 0, n)
    return bytes(out)

  def xdata_write(self, address: int, data: bytes) -> None:
    if address < 0 or address + len(data) > 0x10000:
      raise DeviceError(f"{self.name}: XDATA write at {address:#x}+{len(data)} is outside 64 KiB")
    for i, b in enumerate(data): self.control_out(REQ_XDATA_WRITE, address + i, b, idempotent=True)

  # ---- PCIe power and link
  def power(self, on: bool) -> None: self.control_out(REQ_POWER, 1 if on else 0, 0, idempotent=True)
  def ltssm(self) -> int: return self.xdata_read(LTSSM_STATE, 1)[0]
  @property
  def link_up(self) -> bool: return self.ltssm() == LTSSM_L0

  # ---- TLPs
  def _completion(self, fmt_type: int, address: int) -> tuple[int, int, int]:
    """(data, status, transport) of the last request."""
    raw = self.control_in(REQ_TLP, 0, 0, 8)
    data, = struct.unpack_from("<I", raw)
    return data, raw[4] >> 5, raw[7]

  def _check(self, fmt_type: int, address: int, status: int) -> None:
    if status == pcie.CPL_SC: return
    name = pcie.CPL_STATUS_NAMES.get(status, f"reserved completion status {status:#05b}")
    raise CompletionError(f"{self.name}: {describe(fmt_type, address)}: {name}", status, address)

  def tlp(self, fmt_type: int, address: int, value: int = 0, byte_enables: int = 0xF) -> int | None:
    """One TLP; returns the completion's data for a non-posted request (None for a memory write)."""
    payload = struct.pack("<III", address & 0xFFFFFFFF, address >> 32, value & 0xFFFFFFFF)
    for attempt in range(TRANSPORT_RETRIES + 1):
      with self._sequence:
        self.control_out(REQ_TLP, fmt_type | byte_enables << 8, MODE_SINGLE, payload, idempotent=not pcie.has_data(fmt_type))
        if pcie.is_posted(fmt_type): return None
        data, status, transport = self._completion(fmt_type, address)
      if not transport:
        self._check(fmt_type, address, status)
        return data
      self.retries["transport"] += 1
      self._sleep(TRANSPORT_RETRY_S)
    raise DeviceError(f"{self.name}: {describe(fmt_type, address)}: transport error {transport:#x} "
                      f"{TRANSPORT_RETRIES + 1} times in a row (the bridge could not send the TLP)")

  def _announced(self, request, transfer):
    """request() announces one bulk transfer, which transfer() moves; returns transfer()'s result. A timed-out
    request may have reached the firmware or not: the transfer is tried once (through if the burst was queued, a
    timeout if nothing was), and only then is the request asked again (up to TIMEOUT_RETRIES times). Under the
    bridge's lock (a caller that reads a completion after the burst holds it around both)."""
    with self._sequence:
      for attempt in range(TIMEOUT_RETRIES + 1):
        requested = False
        try:
          request()
          requested = True
          return transfer()
        except Timeout:
          if requested or attempt == TIMEOUT_RETRIES: raise
          self.retries["timeout"] += 1
          try: return transfer()
          except Timeout: continue     # nothing was queued (or the burst is lost): ask again
        except BaseException as e:
          # Ctrl-C once the request may have reached the firmware: its queued burst would answer the next request's
          # bulk transfer (that write's data landing at this one's address), so it is moved now, then the interrupt
          # goes on. (An error of hcq's from the request: refused or gone, nothing was queued.)
          if not requested and not isinstance(e, (DeviceError, Timeout)): self._drain(transfer)
          raise

  @staticmethod
  def _drain(transfer) -> None:
    """Move the burst an interrupted request may have queued (a write lands where it was meant to, a read's data is
    dropped); nothing queued: the transfer times out, which is what was hoped for."""
    try: transfer()
    except (DeviceError, Timeout): pass

  def _stream(self, mode: int, fmt_type: int, address: int, dwords: int) -> None:
    self.control_out(REQ_TLP, fmt_type | 0xF << 8, mode, struct.pack("<III", address & 0xFFFFFFFF, address >> 32, dwords))

  def _whole_dwords(self, what: str, address: int, size: int) -> None:
    """A burst moves whole dwords (the request counts dwords): anything else would drop or invent bytes."""
    if address % 4 or size % 4:
      raise DeviceError(f"{self.name}: streaming {what} of {size} bytes at {address:#x}: not whole dwords "
                        f"(address and length must be multiples of 4)")

  def stream_write(self, address: int, data: bytes) -> None:
    """MWr64 of whole dwords from `address` (dword aligned), up to 4 MiB per request; more than one request: up to
    `in_flight` of them in flight (usbpipeline.py), their announces sent while earlier bursts are still moving."""
    self._whole_dwords("write", address, len(data))
    step = STREAM_MAX_DWORDS * 4
    if len(data) > step and self.in_flight > 1:
      view = memoryview(bytes(data))
      with self.pipeline() as p:
        for off in range(0, len(data), step):
          chunk = view[off:off + step]
          p.burst(REQ_TLP, pcie.MWR64 | 0xF << 8, MODE_STREAM_WRITE,
                  struct.pack("<III", (address + off) & 0xFFFFFFFF, (address + off) >> 32, len(chunk) // 4), chunk)
      return
    for off in range(0, len(data), STREAM_MAX_DWORDS * 4):
      chunk = data[off:off + STREAM_MAX_DWORDS * 4]
      self._announced(lambda: self._stream(MODE_STREAM_WRITE, pcie.MWR64, address + off, len(chunk) // 4),
                      lambda: self.bulk_out(chunk))

  def stream_read(self, address: int, size: int) -> bytes:
    """MRd64 of whole dwords from `address` (dword aligned); checks the burst's completion status."""
    self._whole_dwords("read", address, size)
    out = bytearray()
    for off in range(0, size, STREAM_MAX_DWORDS * 4):
      n = min(size - off, STREAM_MAX_DWORDS * 4)
      for attempt in range(TRANSPORT_RETRIES + 1):
        with self._sequence:
          chunk = self._announced(lambda: self._stream(MODE_STREAM_READ, pcie.MRD64, address + off, n // 4),
                                  lambda: self.bulk_in(n))
          done, status, transport = self._completion(pcie.MRD64, address + off)
        if not transport: break
        self.retries["transport"] += 1
        self._sleep(TRANSPORT_RETRY_S)
      else:
        raise DeviceError(f"{self.name}: streaming read at {address + off:#x}: transport error {transport:#x} "
                          f"{TRANSPORT_RETRIES + 1} times in a row")
      self._check(pcie.MRD64, address + off + 4 * done, status)
      out += chunk
    return bytes(out)

  # ---- the SRAM DMA engine (16 KiB slots, 512-byte sectors)
  def _arm(self, slot: int, size: int, read: bool, request: bool = False):
    """(the request that arms the engine for `size` bytes from `slot`, the sector-padded size it moves); request:
    the request's (bRequest, wValue, wIndex, data) instead of a call that sends it (a pipeline sends it)."""
    sectors = (size + SECTOR - 1) // SECTOR
    slots = (size + SLOT - 1) // SLOT
    if slot < 0 or slot + slots > SRAM_SLOTS or not 0 < sectors < 0x8000:
      raise DeviceError(f"{self.name}: SRAM DMA of {size} bytes at slot {slot} is outside the {SRAM_SLOTS} slots")
    value, index = sectors | (0x8000 if read else 0), slot | slots << 8
    if request: return (REQ_SRAM_DMA, value, index, None), sectors * SECTOR
    return lambda: self.control_out(REQ_SRAM_DMA, value, index), sectors * SECTOR

  def sram_arm_request(self, slot: int, size: int, read: bool) -> tuple:
    """(bRequest, wValue, wIndex, data) of the request that arms the DMA engine for `size` bytes from `slot` (a
    pipeline sends it: usbpipeline.BurstPipeline.announce)."""
    return self._arm(slot, size, read, request=True)[0]

  def sram_write(self, slot: int, data: bytes) -> None:
    """Host -> SRAM from slot `slot`: the data, padded to whole sectors with zeros."""
    arm, padded = self._arm(slot, len(data), read=False)
    self._announced(arm, lambda: self.bulk_out(bytes(data) + bytes(padded - len(data))))

  def sram_read(self, slot: int, size: int) -> bytes:
    arm, padded = self._arm(slot, size, read=True)
    return self._announced(arm, lambda: self.bulk_in(padded))[:size]

  def close(self) -> None:
    if self.usb is not None:
      try: self.usb.close()
      except DeviceError: pass   # a gone bridge cannot release its interface; nothing is left to free
      self.usb = None

  def __repr__(self): return f"ASM24Bridge({self.name})"


class _Locked:
  """A BurstPipeline under the bridge's lock (no other thread's request between its bursts), its deepest bulk
  queue noted on the bridge."""

  def __init__(self, lock, pipeline, bridge):
    self.lock, self.p, self.bridge = lock, pipeline, bridge

  def __enter__(self):
    self.lock.acquire()
    try: return self.p.__enter__()
    except BaseException:
      self.lock.release()
      raise

  def __exit__(self, *exc):
    try: return self.p.__exit__(*exc)
    finally:
      self.bridge.bulk_max_in_flight = max(self.bridge.bulk_max_in_flight, self.p.bulk_max)
      self.lock.release()
