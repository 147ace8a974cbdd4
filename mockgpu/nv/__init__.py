"""The mock NV GPU: nvidia.ko's RM and UVM ioctls as a model (rm.py), GPUs with GPFIFO channels, a pushbuffer method
interpreter and QMD launches (gpu.py, qmd.py), run by the PTX interpreter (ptx/, the nvptx helper's); device.py puts
them into a MockOS."""
