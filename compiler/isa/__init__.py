"""Instruction-set toolkits (encoders, decoders, disassemblers, assemblers) by architecture: ir3/ (Adreno)."""
