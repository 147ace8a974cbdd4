"""Code generators: c.py (C source + a CPU work-group runner), amd/ (RDNA3: ISA tables, assembler, disassembler, code objects), PTX later."""
