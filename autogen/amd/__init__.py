"""Generated AMD modules (python -m hcq.autogen)."""
