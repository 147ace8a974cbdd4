"""The mock Broadcom Thor2 RoCE NIC: a PCI function with HWRM/RCFW firmware, a RoCEv2 data path and a real wire
(UDP on 127.0.0.1, PHY loopback), recorded to pcap. See nic.MockThor2 and mockos.BnxtMockOS."""
from __future__ import annotations


def open_bnxt_mock(config, index: int = 0):
  """(BnxtMockOS with one MockThor2, the NIC) configured from config's bnxt_mock_* options."""
  from .mockos import BnxtMockOS
  from .nic import MockThor2
  mac = bytes.fromhex(getattr(config, "bnxt_mock_mac", "") or f"0200000000{index + 1:02x}")
  nic = MockThor2(addr=f"0000:{0x41 + index:02x}:00.0", mac=mac, udp_port=getattr(config, "bnxt_mock_port", 0),
                  peer_port=getattr(config, "bnxt_mock_peer", 0) or None, pcap=getattr(config, "bnxt_mock_pcap", "") or None,
                  faults=getattr(config, "bnxt_mock_faults", "") or None)
  os = BnxtMockOS(config)
  os.add_device(nic)
  return os, nic
