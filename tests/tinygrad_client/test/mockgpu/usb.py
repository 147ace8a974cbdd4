"""What tinygrad 0.14 imports as its USB class when DEV's interface starts with MOCK (tinygrad/runtime/support/usb.py).

tinygrad's USB3 talks libusb directly (not through FileIOInterface); hcq's mock ASM24xx bridges are reached through
pyusb (MockOS.set_usb_backend). This adapter does not serve MOCKUSB+AMD yet: opening it fails with this reason."""


class MockUSB3:
  def __init__(self, *args, **kwargs):
    raise RuntimeError("tinygrad adapter: MOCKUSB+AMD is not served (tinygrad's USB3 drives libusb; hcq's mock USB "
                       "bridges sit behind a pyusb backend, see tests/tinygrad_client/README.md)")
