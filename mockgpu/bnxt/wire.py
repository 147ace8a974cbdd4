"""The mock NIC's PHY: a UDP socket on 127.0.0.1 that carries whole Ethernet frames.

- PHY loopback (port_phy_cfg lpbk LOCAL): a transmitted frame is sent to the PHY's own socket, so it comes back through
  the same receive thread as a frame from a peer would.
- UDP wire: frames go to a peer mock NIC's socket on 127.0.0.1 (another process). No other address is ever used.
- Neither: the frame leaves for "the switch" and is counted as dropped.
A pcap tap records every transmitted frame and every frame received from a peer (a looped-back frame is the transmitted
one again, so it is recorded once). Fault injection acts on transmitted frames, numbered from 1.
"""
from __future__ import annotations

import dataclasses
import random
import socket
import threading
from typing import Callable

from ...config import parse_faults
from ...errors import OSCallError
from .pcap import PcapWriter

LOCALHOST = "127.0.0.1"
MAX_FRAME = 65507   # the largest UDP datagram on IPv4; 9 KiB jumbo frames fit


@dataclasses.dataclass
class FaultPlan:
  """Wire faults on transmitted frames. Spec "drop=3,corrupt=1+4,reorder=2,p_drop=0.1,seed=7": drop frame 3, flip a
  payload bit in frames 1 and 4 (their ICRC then fails), send frame 2 after frame 3, and drop 10% of the rest."""
  drop: frozenset[int] = frozenset()
  corrupt: frozenset[int] = frozenset()
  reorder: frozenset[int] = frozenset()
  p_drop: float = 0.0
  p_corrupt: float = 0.0
  seed: int = 0

  @classmethod
  def parse(cls, spec: str | None) -> "FaultPlan":
    """The plan a spec describes (grammar: config.parse_faults, which the environment and the CLI check with too);
    a ValueError naming the item that is wrong."""
    return cls(**parse_faults(spec or ""))

  @property
  def empty(self) -> bool:
    return not (self.drop or self.corrupt or self.reorder or self.p_drop or self.p_corrupt)


def corrupt_frame(frame: bytes) -> bytes:
  """Flip one bit of the last byte before the ICRC (payload or pad): only the ICRC check can notice."""
  b = bytearray(frame)
  b[-5] ^= 0x01
  return bytes(b)


class Phy:
  """One port of a mock NIC. rx_handler(frame) runs on the receive thread for every frame that arrives."""

  def __init__(self, name: str = "phy", port: int = 0, peer_port: int | None = None, pcap: str | None = None,
               faults: FaultPlan | None = None, log: Callable[[str], None] | None = None,
               error: Callable[[str], None] | None = None):
    self.name = name
    self.pcap = PcapWriter(pcap) if pcap else None   # first: a pcap that cannot be written leaves no socket behind
    self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    # what the kernel granted (capped by net.core.rmem_max): the NIC keeps its unacknowledged packets below it
    self.rx_buffer_bytes = self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
    try: self.sock.bind((LOCALHOST, port))
    except OSError as e:   # the port is taken (or not ours to take): say which, leave nothing open
      self.sock.close()
      if self.pcap: self.pcap.close()
      raise OSCallError("bind", f"{name}: UDP {LOCALHOST}:{port}", e.errno) from None
    self.sock.settimeout(0.05)       # the receive loop checks its stop flag at least this often
    self.address = self.sock.getsockname()
    self.peer = (LOCALHOST, peer_port) if peer_port else None
    self.loopback = False
    self.faults = faults or FaultPlan()
    self._rng = random.Random(self.faults.seed)
    self._held: list[bytes] = []
    self._tx_lock = threading.Lock()
    self.rx_handler: Callable[[bytes], None] | None = None
    self.log = log or (lambda msg: None)
    self.error = error or self.log
    self.stats = {"tx": 0, "rx": 0, "tx_dropped_no_link": 0, "fault_dropped": 0, "fault_corrupted": 0,
                  "fault_reordered": 0}
    self._stop = threading.Event()
    self._thread = threading.Thread(target=self._receive_loop, name=f"{name}-rx", daemon=True)
    self._thread.start()

  def set_peer(self, port: int) -> None:
    """Send to the peer PHY bound to this UDP port on 127.0.0.1 (its port comes from the peer itself)."""
    if not isinstance(port, int) or not 0 < port < 65536: raise ValueError(f"{self.name}: bad peer UDP port {port!r}")
    self.peer = (LOCALHOST, port)

  # --- transmit ---
  def transmit(self, frame: bytes) -> None:
    with self._tx_lock:
      self.stats["tx"] += 1
      n = self.stats["tx"]
      f = self.faults
      if self.pcap and not (n in f.drop): self.pcap.write(frame)
      if n in f.drop or (f.p_drop and self._rng.random() < f.p_drop):
        self.stats["fault_dropped"] += 1
        self.log(f"{self.name}: fault injection dropped frame {n}")
        return
      if n in f.corrupt or (f.p_corrupt and self._rng.random() < f.p_corrupt):
        self.stats["fault_corrupted"] += 1
        frame = corrupt_frame(frame)
      if n in f.reorder:
        self.stats["fault_reordered"] += 1
        self._held.append(frame)
        threading.Timer(0.05, self._release_held).start()   # sent late even when no frame follows
        return
      self._send(frame)
      self._release_held_locked()

  def _release_held(self) -> None:
    try:
      with self._tx_lock: self._release_held_locked()
    except Exception as e:   # on a timer thread: record it, never lose it
      self.error(f"{self.name}: sending a reordered frame failed: {type(e).__name__}: {e}")

  def _release_held_locked(self) -> None:
    held, self._held = self._held, []
    for frame in held: self._send(frame)

  def _send(self, frame: bytes) -> None:
    if len(frame) > MAX_FRAME: raise ValueError(f"{self.name}: frame of {len(frame)} bytes exceeds the wire's {MAX_FRAME}")
    if self.loopback: dest = self.address
    elif self.peer: dest = self.peer
    else:
      self.stats["tx_dropped_no_link"] += 1
      return
    if dest[0] != LOCALHOST: raise ValueError(f"{self.name}: refusing to send to {dest[0]}: the mock wire is 127.0.0.1 only")
    try: self.sock.sendto(frame, dest)
    except OSError as e: self.log(f"{self.name}: sendto {dest} failed: {e}")

  # --- receive ---
  def _receive_loop(self) -> None:
    while not self._stop.is_set():
      try: frame, src = self.sock.recvfrom(MAX_FRAME)
      except socket.timeout: continue
      except OSError as e:   # the socket closed under us (close()) or failed: say so unless we are stopping
        if not self._stop.is_set(): self.error(f"{self.name}: the PHY's socket failed, the port is down: {e}")
        break
      if src[0] != LOCALHOST:   # cannot happen on a socket bound to 127.0.0.1; counted if it ever does
        self.stats["rx_foreign"] = self.stats.get("rx_foreign", 0) + 1
        continue
      self.stats["rx"] += 1
      if self.pcap and src != self.address: self.pcap.write(frame)
      handler = self.rx_handler
      if handler is None: continue
      try: handler(frame)
      except Exception as e:   # a failure (a DMA fault, a model bug) must not kill the PHY: record it and go on
        self.error(f"{self.name}: receive handler failed: {type(e).__name__}: {e}")

  def close(self) -> None:
    self._stop.set()
    if self._thread is not threading.current_thread(): self._thread.join(timeout=2)
    self.sock.close()
    if self.pcap: self.pcap.close()
