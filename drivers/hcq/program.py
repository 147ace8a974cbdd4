"""Program: a kernel loaded on a device, callable as prog(*args, global_size=..., local_size=..., wait=...).

The generic part of every vendor's program: the kernarg layout from the code object's metadata, argument and launch
checks (all before anything is submitted), and a cache of per-launch-shape data the vendor builds once
(make_shape); the vendor's device does the launch (device.launch(prog, shape, explicit_kernargs, timed))."""
from __future__ import annotations

from .args import ArgLayout, check_launch


class Program:
  def __init__(self, device, name: str, layout: ArgLayout, max_group: int):
    self.device, self.name, self.layout, self.max_group = device, name, layout, max_group
    self._shapes: dict = {}
    self.required_block: tuple[int, int, int] | None = None   # a work-group size the kernel was compiled for
    self.launches = 0

  def make_shape(self, grid: tuple[int, int, int], block: tuple[int, int, int], timed: bool, shared: int | None = None):
    """Per-launch-shape data (command buffer template, hidden kernargs): built once, reused. shared: the group-shared
    memory bytes of a launch whose arguments ask for shared blocks (after the kernel's static share), else None."""
    raise NotImplementedError

  def shape(self, global_size, local_size, timed: bool, shared: int | None = None):
    """The launch shape for these sizes (ints or sequences of up to 3 ints), checked and built on first use."""
    key = (global_size, local_size, timed) if shared is None else (global_size, local_size, timed, shared)
    try: return self._shapes[key]
    except (KeyError, TypeError): pass   # new, or given as lists (unhashable)
    grid, block = check_launch(self.name, global_size, local_size, self.max_group, self.required_block)
    norm = (grid, block, bool(timed)) if shared is None else (grid, block, bool(timed), shared)
    s = self._shapes.get(norm)
    if s is None: s = self._shapes[norm] = self.make_shape(grid, block, bool(timed), shared)
    if isinstance(global_size, (int, tuple)) and isinstance(local_size, (int, tuple)): self._shapes[key] = s
    return s

  def __call__(self, *args, global_size=(1, 1, 1), local_size=(1, 1, 1), wait: bool = False, shared_mem: int | None = None):
    """Launch with args in the kernel's signature order (Buffers, ints, floats; the size in bytes for a __local
    pointer); global_size counts work-groups, local_size threads per work-group. shared_mem: the bytes of dynamic
    shared memory of a kernel that takes one block sized at launch (CUDA's extern __shared__, the launch's third
    parameter), instead of giving it as a last argument. Returns the kernel's time in seconds when wait=True, else
    None."""
    dev, layout = self.device, self.layout
    if dev.closed: dev._check_open()
    if shared_mem is not None:
      from ...errors import DeviceError
      from .args import is_integer
      if not layout.dynamic_shared:
        raise DeviceError(f"{dev.name}: kernel {self.name}: shared_mem={shared_mem!r}, but the kernel uses no dynamic shared memory")
      if not is_integer(shared_mem) or int(shared_mem) < 0:
        raise DeviceError(f"{dev.name}: kernel {self.name}: shared_mem must be a number of bytes >= 0, got {shared_mem!r}")
      args = (*args, int(shared_mem))
    explicit = layout.check_and_pack(args, dev.buffer_type, dev)
    # a traced device times every launch (its GPU timestamps go to the trace: drivers/hcq/trace.py)
    timed = wait or getattr(dev, "tracer", None) is not None
    shape = self.shape(global_size, local_size, timed, layout.shared_layout(args)[1] if layout.dynamic_shared else None)
    return dev.launch(self, shape, explicit, wait)

  def __repr__(self): return f"{type(self).__name__}({self.name})"


class Module:
  """The kernels of one code object (dev.load(image) when it holds several): mod["name"] is a Program, loaded on
  first use and kept; the code object itself is loaded once (each driver keeps one upload per image)."""

  def __init__(self, device, image: bytes, names: list[str]):
    self.device, self.image, self.names = device, image, list(names)
    self._programs: dict[str, Program] = {}

  def __getitem__(self, name: str):
    prog = self._programs.get(name)
    if prog is None:
      if name not in self.names:
        from ...errors import DeviceError
        raise DeviceError(f"{self.device.name}: no kernel {name!r} in the code object (it has {', '.join(self.names)})")
      prog = self._programs[name] = self.device.load(self.image, name)
    return prog

  def __contains__(self, name) -> bool: return name in self.names
  def __iter__(self): return iter(self.names)
  def __len__(self) -> int: return len(self.names)
  def keys(self): return list(self.names)
  def items(self): return [(n, self[n]) for n in self.names]
  def __repr__(self): return f"Module({', '.join(self.names)})"
