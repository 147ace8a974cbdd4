"""How a driver declares itself to hcq.open: its vendor, its interfaces, which of them the embedded mock serves (and
the mock's entry that builds the OS interface the driver then opens), and which are looked for when hcq.open() is
given no spec. This is the only registry: the mock keeps no table of its own.

Each driver package declares `DRIVER = Driver(...)` in its __init__.py (which imports nothing heavy); hcq.open, spec
parsing, autodetection and the README's device list are derived from those declarations. A vendor is declared when
it works, not before."""
from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Interface:
  """One way of reaching a vendor's devices (KFD, PCI, USB, NV, ...), as a spec names it."""
  name: str                      # the spec's interface: "KFD" in "KFD+AMD:0"
  summary: str                   # one line for the README and errors
  mocks: tuple[str, ...] = ()    # spec interfaces that open this interface on the embedded mock ("MOCK", "MOCKKFD")
  probe: str | None = None       # a path whose presence says the hardware may be there: autodetected; None: never
  # the mock's entry for this interface: a dotted path under hcq's mock package ("amd.kfd_os": the function kfd_os of
  # its amd package), called (index, config, label) -> the OS interface object the driver opens instead of Linux's.
  # Only hcq.open resolves it: the driver names it here and never imports the mock (docs/DESIGN.md §2, §6).
  mock: str | None = None

  def __post_init__(self):
    if bool(self.mocks) != bool(self.mock):
      raise ValueError(f"interface {self.name!r}: mock spec names {self.mocks} need a mock entry and a mock entry "
                       f"needs spec names (mock={self.mock!r})")


@dataclasses.dataclass(frozen=True)
class Driver:
  """A vendor's driver package and the interfaces it opens devices through."""
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


@dataclasses.dataclass(frozen=True)
class DeviceRecord:
  """One spec hcq.open takes, as hcq.device_list() gives it: data, not text (`hcq devices` and the README's list are
  rendered from these)."""
  spec: str                      # "KFD+AMD", "MOCKPCI+AMD", "CPU"
  vendor: str                    # "AMD"
  interface: str                 # the driver's interface this spec opens ("KFD"; "" for CPU)
  alias: str | None              # the shorter spec that means the same ("AMD" for KFD+AMD), None when there is none
  summary: str                   # the driver's summary, then the interface's: what it drives and how
  mock_of: str | None            # the hardware spec an embedded mock stands in for, None for a hardware spec
  autodetected: bool             # hcq.open() with no spec looks for it (its probe path)
  probe: str | None              # that path

  def as_json(self) -> dict:
    return dataclasses.asdict(self)


def device_records(drivers) -> list[DeviceRecord]:
  """Every spec of the registered drivers ({vendor: Driver}), hardware spec first and then its mocks."""
  out = []
  for d in drivers.values():
    for i in d.interfaces:
      spec = f"{i.name}+{d.vendor}" if i.name else d.vendor
      alias = d.vendor if i.name and i.name == d.default else None
      summary = f"{d.summary}, {i.summary}"
      out.append(DeviceRecord(spec, d.vendor, i.name, alias, summary, None, i.probe is not None, i.probe))
      for m in i.mocks:
        out.append(DeviceRecord(f"{m}+{d.vendor}", d.vendor, i.name, None, summary, spec, False, None))
  return out


def markdown(records) -> str:
  """The README's device list: one line per record."""
  lines = []
  for r in records:
    if r.mock_of: lines.append(f"- `{r.spec}`: the embedded mock of `{r.mock_of}`")
    else:
      also = f" (also `{r.alias}`)" if r.alias else ""
      lines.append(f"- `{r.spec}`{also}: {r.summary}{'; autodetected' if r.autodetected else ''}")
  return "\n".join(lines)
