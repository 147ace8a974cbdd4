"""Generated NVIDIA modules (python -m hcq.autogen)."""
