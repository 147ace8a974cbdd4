"""What tinygrad 0.14 imports as its file-I/O class when DEV's interface starts with MOCK
(tinygrad/runtime/support/hcq.py): the adapter to hcq's MockOS (tests/tinygrad_client/tg_adapter).

Imported while tinygrad.runtime.support.hcq is being imported (MMIOInterface and FileIOInterface are defined,
nothing imported from it yet), so the replacements below are what tinygrad's drivers bind."""
import sys

from tg_adapter import fileio, mmio, system

_hcq = sys.modules["tinygrad.runtime.support.hcq"]
_hcq.MMIOInterface = mmio.routed_mmio_class(_hcq.MMIOInterface)
MockFileIOInterface = fileio.make_class(_hcq.FileIOInterface)


def _install_late():
  """Patches of modules that import tinygrad.runtime.support.hcq (not importable before it is complete)."""
  system.install()
  system.install_fetch_fw()


# tinygrad.runtime.support.system imports hcq: install when it is first imported (a meta-path hook would be more
# machinery than this; the client runner calls install_late() before it opens a device as well)
install_late = _install_late
