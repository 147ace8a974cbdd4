"""The mock Broadcom Thor2 RoCE NIC: a PCI function with HWRM/RCFW firmware, a RoCEv2 data path and a real wire
(UDP on 127.0.0.1, PHY loopback), recorded to pcap. nic.MockThor2 is a PCI function of a mockgpu.MockOS."""
from __future__ import annotations


def pci_os(index: int, config, label: str):
  """The entry drivers/bnxt's declaration names (Interface.mock): a MockOS with index + 1 mock Thor2 NICs on a UDP
  wire (the last one takes config's bnxt_mock_* options)."""
  return open_bnxt_mock(config, index)[0]


def open_bnxt_mock(config, index: int = 0):
  """(MockOS with index+1 mock NICs, the last of them); the last NIC takes config's bnxt_mock_* options (its UDP
  port, peer port, pcap, faults, MAC)."""
  from ..mockos import MockOS
  os = MockOS(config)
  try: return os, _add_nics(os, config, index)
  except BaseException:
    os.close()      # the NICs made so far (their sockets and threads) go with it
    raise


def _add_nics(os, config, index: int, bus: int = 0x41):
  from .nic import MockThor2
  nic = None
  for i in range(index + 1):
    last = i == index
    mac = bytes.fromhex(config.bnxt_mock_mac) if last and config.bnxt_mock_mac else bytes([2, 0, 0, 0, 0, i + 1])
    nic = MockThor2(addr=f"0000:{bus + i:02x}:00.0", mac=mac, port_id=0,
                    udp_port=config.bnxt_mock_port if last else 0,
                    peer_port=(config.bnxt_mock_peer or None) if last else None,
                    pcap=(config.bnxt_mock_pcap or None) if last else None,
                    faults=(config.bnxt_mock_faults or None) if last else None)
    os.add_device(nic)
  return nic
