"""PTX interpreter of the mock NV GPU: parses PTX text (the ISA 7.x/8.x subset clang-19 and hcq's PTX backend emit)
and runs kernels with numpy, every thread of a batch of CTAs at once.

    from hcq.mockgpu.nv.ptx import parse, run, PTXError, Stopped
    mod = parse(ptx_text)                          # PTXError naming the line and its text
    k = mod.kernels["vadd"]                        # k.params, k.param_bytes, k.static_shared_bytes,
                                                   # k.local_bytes_per_thread
    stats = run(k, grid=(gx, gy, gz), block=(bx, by, bz), params=param_block_bytes, memory=gpu_memory,
                dynamic_shared=0, stop=None)       # {"thread_instructions": ..., ...}

memory is a mockgpu.gpumem.GPUMemory (GPU VA == host VA); an access outside its ranges raises
hcq.errors.GPUFault (kind "page fault", .address). stop: a callable polled about every 20 ms; True ends the run
with Stopped. Modules: parser.py (text -> model.py objects), operands.py / instrs.py (each instruction compiled to a
numpy closure; semantics.py holds the arithmetic), memspace.py (state spaces), executor.py (basic blocks, the
per-thread-PC scheduler, barriers, batches of CTAs).

Not supported (PTXError when a kernel uses them): function calls (call, .func bodies), indirect branches (brx.idx),
texture/surface instructions, wmma/mma/wgmma tensor instructions, cp.async and the TMA,
cluster-level operations, bar.arrive/bar.red, directed rounding of float arithmetic
(add.rz ...: conversions support every rounding mode).
"""
from .executor import BATCH_THREADS, compile_kernel, run
from .memspace import LOCAL_WINDOW, SHARED_WINDOW
from .model import Param, PTXError, PTXKernel, PTXModule, Stopped
from .parser import parse

__all__ = ["parse", "run", "PTXError", "Stopped", "Param", "PTXKernel", "PTXModule", "compile_kernel",
           "BATCH_THREADS", "SHARED_WINDOW", "LOCAL_WINDOW"]
