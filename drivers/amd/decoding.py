"""What the PM4 and SDMA stream decoders (pm4.decode, sdma.decode) raise at a packet they cannot read."""


class DecodeError(ValueError):
  """A stream that cannot be decoded past some dword; .packets holds the packets decoded before it."""

  def __init__(self, message: str, packets: list):
    super().__init__(message)
    self.packets = packets
