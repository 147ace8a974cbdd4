"""Instruction-set toolkits: machine code read and written without a vendor's compiler, used by the drivers (code
objects), the mock GPUs (decoders), the CLI (`hcq disasm`) and the backends (encoders). amd/: RDNA3/RDNA4/CDNA3."""
