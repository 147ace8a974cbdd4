"""How a driver declares itself to hcq.open: its vendor, its interfaces, which of them the embedded mock serves, and
which are looked for when hcq.open() is given no spec.

Each driver package declares `DRIVER = Driver(...)` in its __init__.py (which imports nothing heavy); hcq.open, spec
parsing, autodetection and the README's device list are derived from those declarations. A vendor is declared when
it works, not before."""
from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Interface:
  name: str                      # the spec's interface: "KFD" in "KFD+AMD:0"
  summary: str                   # one line for the README and errors
  mocks: tuple[str, ...] = ()    # spec interfaces that open this interface on the embedded mock ("MOCK", "MOCKKFD")
  probe: str | None = None       # a path whose presence says the hardware may be there: autodetected; None: never


@dataclasses.dataclass(frozen=True)
class Driver:
  vendor: str                    # "AMD" in "KFD+AMD:0"
  module: str                    # the package holding open_device(iface, index, os, config, label)
  summary: str
  interfaces: tuple[Interface, ...]
  default: str                   # the interface of a spec that names none ("AMD" means "KFD+AMD")
  max_index: int = 63            # the highest device index a spec may name

  def interface(self, spec_iface: str) -> tuple[Interface, bool] | None:
    """(the interface, whether it runs on the mock) for a spec's interface name, None when there is none."""
    for i in self.interfaces:
      if spec_iface == i.name: return i, False
      if spec_iface in i.mocks: return i, True
    return None

  def spec_names(self) -> list[str]:
    return [n for i in self.interfaces for n in ((i.name,) + i.mocks)]
