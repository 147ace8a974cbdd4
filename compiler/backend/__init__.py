"""Backends: c.py (C source + a CPU work-group runner); amd/ (RDNA3, another module's work)."""
