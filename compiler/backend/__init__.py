"""Code generators: c.py (C source + a CPU work-group runner), amd/ (RDNA3: ISA tables, assembler, disassembler, code objects), ptx.py (PTX text for sm_80..sm_100)."""
