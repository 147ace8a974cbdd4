"""Generated Qualcomm Adreno modules (python -m hcq.autogen): the KGSL uapi and the rnndb register modules."""
