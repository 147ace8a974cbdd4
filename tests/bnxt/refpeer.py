"""The second process of test_fidelity's UDP-wire test: a mock Thor2 driven by the reference-layout variant
(variants.RefLayoutDev / RefLayoutQP) as the responder. JSON lines: it prints its endpoint and buffer, reads the
peer's endpoint, connects, and answers {"read": n} with the first n bytes of its buffer (hex) and its NIC's errors."""
from __future__ import annotations

import json
import sys

from hcq.config import Config
from hcq.mockgpu import MockOS
from hcq.mockgpu.bnxt.nic import MockThor2

from .variants import RefLayoutDev, RefLayoutQP, open_variant


def main() -> int:
  os = MockOS(Config(timeout_s=10.0))
  try:
    nic = MockThor2(addr="0000:42:00.0", mac=bytes.fromhex("020000000002"), seed=2)
    os.add_device(nic)
    dev = open_variant(os, nic, RefLayoutDev, ip="10.0.200.6")
    qp = RefLayoutQP(dev)
    buf = dev.alloc(8192)
    rkey = dev.register_mr(buf)

    def say(obj): print(json.dumps(obj), flush=True)

    say({"qpn": qp.qpn, "gid": dev.gid.hex(), "mac": dev.mac.hex(), "wire": dev.wire_endpoint(), "va": buf.va,
         "rkey": rkey})
    for line in sys.stdin:
      msg = json.loads(line)
      if "qpn" in msg:
        dev.wire_connect(msg["wire"])
        qp.connect(msg["qpn"], bytes.fromhex(msg["gid"]), bytes.fromhex(msg["mac"]))
        say({"ready": True})
      elif "read" in msg:
        say({"data": buf.read(0, msg["read"]).hex(), "errors": nic.errors, "messages": nic.messages[-50:]})
      elif msg.get("quit"): break
    return 0
  finally:
    os.close()


if __name__ == "__main__":
  sys.exit(main())
