"""The AMD driver: AMDDevice on the HCQ runtime, over a session (KFD: the amdgpu kernel driver's /dev/kfd; PCI: AM,
the GPU booted by hcq itself, am/; USB: AM behind a USB bridge, am/usb.py).

  device.py     AMDDevice: engines "compute" (PM4) and "copy" (SDMA), launches with register-state reuse, scratch,
                code-object loading, bound launches as INDIRECT_BUFFERs, the interrupt a blocked wait asks for
  session.py    the contract between AMDDevice and its session; kfd.py: KFDSession (kfd_events.py: the event page);
                am/session.py: AMSession
  program.py    AMDProgram: code object kernel -> COMPUTE_* registers, user SGPRs, per-shape command buffers
  kernargs.py   the runtime's argument layout for code object v5 (explicit and hidden kernel arguments)
  packets.py    queue programs (hcq.compiler.queue) -> PM4 / SDMA packets by pattern matchers
  pm4.py, sdma.py  packet builders and decoders; the compute registers and packet differences per GC / SDMA version
  aql.py        the AQL compute queue of multi-XCC parts (gfx942): dispatch packets, PM4 in indirect buffers
  kernels/      demo.hsaco (empty, vadd, matmul) for `hcq demo` and bench/launch.py

DRIVER declares the interfaces to hcq.open (drivers/hcq/registry.py); open_device builds a device for one."""
from __future__ import annotations

from ...errors import DeviceError
from ..hcq.registry import Driver, Interface

DRIVER = Driver(
  vendor="AMD", module=__name__, summary="AMD GPUs (gfx1100, gfx1200, gfx942)", default="KFD",
  interfaces=(Interface("KFD", "through the amdgpu kernel driver's /dev/kfd", mocks=("MOCK", "MOCKKFD"),
                        mock="amd.kfd_os", probe="/dev/kfd"),
              Interface("PCI", "from userspace over PCI (AM: hcq boots the GPU itself; gfx1100 / Navi 31 only so far, "
                        "amdgpu unbound)",
                        mocks=("MOCKPCI",), mock="amd.pci_os"),
              Interface("USB", "from userspace through an ASM24xx USB4-to-PCIe bridge (AM over PCIe TLPs; Navi 31)",
                        mocks=("MOCKUSB",), mock="amd.usb_os")))


def open_device(iface: str, index: int, os, config, label: str | None = None):
  """The AMD GPU number `index` through interface `iface`; label names it in errors (default "IFACE+AMD:index")."""
  from .device import AMDDevice
  if iface == "KFD":
    from .kfd import KFDSession
    return AMDDevice(KFDSession(os, index, config, label=label), os, config)
  if iface == "PCI":
    from .am.session import open_am
    return open_am(os, index, config, label)
  if iface == "USB":
    from .am.usb import open_am_usb
    return open_am_usb(os, index, config, label)
  raise DeviceError(f"AMD: interface {iface!r} is not supported (supported: KFD, PCI, USB)")


def __getattr__(name):
  if name == "AMDDevice":
    from .device import AMDDevice
    return AMDDevice
  raise AttributeError(name)


__all__ = ["AMDDevice", "DRIVER", "open_device"]
