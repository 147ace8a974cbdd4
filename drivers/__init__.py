"""hcq's userspace drivers. Layers: system (OS interface) <- hcq (generic runtime) <- vendor drivers."""
