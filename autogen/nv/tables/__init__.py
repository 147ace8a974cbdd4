"""Hand-written tables of NVIDIA interface facts no header Debian ships holds (QMD layouts, compute class methods,
RM escape numbers, version-specific RM struct layouts). Every table names the public NVIDIA file it was copied from."""
