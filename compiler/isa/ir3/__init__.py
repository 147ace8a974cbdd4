"""ir3 (Adreno shader ISA): decoder/disassembler (isa.py, from Mesa's isaspec description) and assembler."""
