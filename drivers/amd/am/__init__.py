"""AM: AMD GPUs driven without the amdgpu kernel driver, from userspace over PCI (Navi 31 / gfx1100 first).

  pci.py        AMPCI: the PCI function locked (am_<bus>.lock), bus mastering, VRAM/doorbell/MMIO BARs, system memory
  discovery.py  the IP discovery binary at the top of VRAM: IP versions and register bases, harvest, GC info
  regs.py       register access (direct, MM_INDEX window) per IP through the generated register modules; bounded waits
  block.py      the sw_init / hw_init / fini phases every block has
  nbio.py gmc.py ih.py psp.py smu.py gfx.py   the IP blocks, in boot order
  memory.py     VRAM: the boot allocator, CPU access through the BAR
  device.py     AMDev: the traced bring-up (`hcq am boot --trace`)
  session.py      AMSession: AMDDevice's session on a booted GPU (memory, compute/SDMA queues, doorbells, IH interrupts)
  usb.py        USB+AMD: AMUSBSession (everything in VRAM, CPU shadows, the bridge's windows) and USBAMDDevice (the
                coherence layer: pushes at the doorbell, DeviceSignals, copies through the bridge's SRAM)
  firmware.py   AMD's firmware containers (amdgpu_ucode.h), also `hcq fw`
"""
