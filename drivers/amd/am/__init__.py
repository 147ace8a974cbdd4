"""AM: AMD GPUs driven without the amdgpu kernel driver. So far: reading AMD's firmware containers (firmware.py)."""
