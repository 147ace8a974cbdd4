"""Python bindings generated from C headers, proven equal to what gcc sees.

  from hcq.autogen import kfd                  # structs, constants, ioctls of include/uapi/linux/kfd_ioctl.h
  v = kfd.AMDKFD_IOC_GET_VERSION(file)         # file: an OS-interface open file (or the mock's); returns the struct
  from hcq.autogen.amd import gc_11_0_0 as gc  # regX / regX_BASE_IDX / X__F__SHIFT / X__F_MASK, and gc.REGS
  gc.REGS.COMPUTE_PGM_RSRC2.encode(USER_SGPR=2)

Modules are regenerated with `python -m hcq.autogen [NAME ...]` (libclang, from the Debian packages pinned in
manifest.json) and checked with `python -m hcq.autogen --check`. Importing a generated module needs only ctypes,
ioctl-opt and runtime.py: no libclang.
"""
