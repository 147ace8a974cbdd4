"""rnndb naming as Mesa 25's gen_header.py does it, on a small database (no Mesa package needed): in a domain with
prefix="variant" an item that has variants is named after its first variant alone (a6xx.xml's a7xx registers:
REG_A7XX_SP_CS_CNTL_1 next to REG_A6XX_SP_CS_CNTL_1), an item without variants after the domain; an array's
registers take the array's variant; an enum declared inside a register is the file's; a reg64's value spans 64 bits.
(The names and values asserted are those Mesa 25.0.7's gen_header.py --rnn DIR --xml t.xml c-defines prints for XML.)"""
from __future__ import annotations

from hcq.autogen import rnndb

XML = """<?xml version="1.0" encoding="UTF-8"?>
<database xmlns="http://nouveau.freedesktop.org/" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:schemaLocation="http://nouveau.freedesktop.org/ rules-fd.xsd">
<enum name="chip"><value name="A6XX"/><value name="A7XX"/></enum>
<domain name="A6XX" width="32" prefix="variant" varset="chip">
  <reg32 offset="0xa9c3" name="SP_CS_CNTL_1" variants="A6XX">
    <bitfield name="THREADSIZE" pos="9" type="boolean"/>
  </reg32>
  <reg32 offset="0xa9c3" name="SP_CS_CNTL_1" variants="A7XX-">
    <bitfield name="THREADSIZE" pos="8" type="boolean"/>
  </reg32>
  <reg32 offset="0x8099" name="GRAS_CNTL">
    <enum name="shift_amount"><value value="0" name="NO_SHIFT"/><value value="2" name="FULL_SHIFT"/></enum>
    <bitfield name="SHIFT" low="1" high="2" type="shift_amount"/>
  </reg32>
  <array offset="0x100" name="MRT" stride="8" length="8" variants="A7XX-">
    <reg32 offset="0x2" name="BUF_INFO"/>
  </array>
  <reg64 offset="0x200" name="BASE" type="waddress" low="6" high="63"/>
</domain>
<domain name="A6XX_CX_MISC" width="32" prefix="variant" varset="chip">
  <reg32 offset="0x1" name="CX_MISC_SW_FUSE_VALUE" variants="A7XX-"><bitfield name="LPAC" pos="1" type="boolean"/></reg32>
  <reg32 offset="0x2" name="PLAIN"/>
</domain>
</database>
"""


def test_variant_prefixed_names(tmp_path):
  (tmp_path / "t.xml").write_text(XML)
  db = rnndb.load(str(tmp_path), "t.xml")
  assert db.registers == {
    "REG_A6XX_SP_CS_CNTL_1": (0xA9C3, ()), "REG_A7XX_SP_CS_CNTL_1": (0xA9C3, ()), "REG_A6XX_GRAS_CNTL": (0x8099, ()),
    "REG_A7XX_MRT": (0x100, (8,)), "REG_A7XX_MRT_BUF_INFO": (0x102, (8,)), "REG_A6XX_BASE": (0x200, ()),
    "REG_A7XX_CX_MISC_SW_FUSE_VALUE": (0x1, ()), "REG_A6XX_CX_MISC_PLAIN": (0x2, ())}
  assert db.fields["A6XX_SP_CS_CNTL_1_THREADSIZE"][:2] == (9, 9)
  assert db.fields["A7XX_SP_CS_CNTL_1_THREADSIZE"][:2] == (8, 8)
  assert db.fields["A6XX_BASE"][:3] == (6, 63, 0)
  assert db.fields["A7XX_CX_MISC_SW_FUSE_VALUE_LPAC"][:2] == (1, 1)
  assert db.enums["shift_amount"] == [("NO_SHIFT", 0), ("FULL_SHIFT", 2)]
