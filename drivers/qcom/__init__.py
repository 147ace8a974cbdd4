"""The QCOM driver: Adreno 6xx GPUs through Qualcomm's kernel driver KGSL (/dev/kgsl-3d0).

  device.py    QCOMDevice on the HCQ runtime; KGSLEngine: the first engine that submits by ioctl (GPU_COMMAND)
  kgsl.py      KGSLSession: properties, memory objects, the draw context, submissions, timestamp waits, fault status
  cp.py        CP packets as data: type-4 register writes and type-7 packets with their parity bits; a decoder
  packets.py   queue programs -> CP packets (a pattern matcher)
  program.py   ir3 compute programs in Mesa computerator's format; the launch (registers, CP_LOAD_STATE6, CP_EXEC_CS)

DRIVER declares the interface to hcq.open (drivers/hcq/registry.py); open_device builds a device for one."""
from __future__ import annotations

from ...errors import DeviceError
from ..hcq.registry import Driver, Interface

DRIVER = Driver(
  vendor="QCOM", module=__name__, summary="Qualcomm Adreno 6xx GPUs (a630)", default="KGSL", max_index=0,
  interfaces=(Interface("KGSL", "through Qualcomm's kernel driver /dev/kgsl-3d0", mocks=("MOCK",),
                        mock="qcom.kgsl_os", probe="/dev/kgsl-3d0"),))


def open_device(iface: str, index: int, os, config, label: str | None = None):
  """The Adreno GPU through interface `iface`; label names it in errors (default "KGSL+QCOM:0")."""
  from .device import QCOMDevice
  if iface == "KGSL":
    from .kgsl import KGSLSession
    return QCOMDevice(KGSLSession(os, index, config, label=label), os, config)
  raise DeviceError(f"QCOM: interface {iface!r} is not supported (supported: KGSL)")


def __getattr__(name):
  if name == "QCOMDevice":
    from .device import QCOMDevice
    return QCOMDevice
  raise AttributeError(name)


__all__ = ["QCOMDevice", "DRIVER", "open_device"]
