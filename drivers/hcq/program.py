"""Program: a kernel loaded on a device, callable as prog(*args, global_size=..., local_size=..., wait=...).

The launch contract every vendor's program shares: the kernarg layout from the code object's metadata, argument and
launch checks (all before anything is submitted), and one LaunchShape per launch shape, built once: its command
buffer lowered from the launch queue program (HCQDevice.launch_cmdbuf: barrier; [timestamp]; call; [timestamp];
store(timeline)) and the vendor's per-shape data (shape_data). The vendor's device does the launch
(device.launch(prog, shape, explicit_kernargs, timed) -> _launch_words)."""
from __future__ import annotations

from .args import ArgLayout, check_launch


class LaunchShape:
  """Everything about a launch that depends only on (program, grid, block, timing, shared memory): built once
  (Program.make_shape), reused by every launch of that shape. cmd: the command buffer of the launch queue program;
  the vendor's per-shape data go in the other slots (Program.shape_data): cmd_repeat (a shorter command buffer for a
  queue that still holds this shape's registers) and registers (what it leaves on the queue), hidden (launch-shape
  dependent argument bytes), data (a template of per-launch data) and data_size (the bytes of launch data it takes);
  anything else a vendor needs goes in the instance's dict."""
  __slots__ = ("grid", "block", "timed", "shared", "cmd", "cmd_repeat", "registers", "hidden", "data", "data_size",
               "__dict__")

  def __init__(self, grid: tuple[int, int, int], block: tuple[int, int, int], timed: bool, shared: int | None = None):
    self.grid, self.block, self.timed, self.shared = grid, block, timed, shared
    self.cmd = self.cmd_repeat = self.registers = self.data = None
    self.hidden, self.data_size = b"", 0

  def __repr__(self): return f"LaunchShape(grid={self.grid}, block={self.block}, timed={self.timed})"


class Program:
  def __init__(self, device, name: str, layout: ArgLayout, max_group: int):
    self.device, self.name, self.layout, self.max_group = device, name, layout, max_group
    self._shapes: dict = {}
    self.required_block: tuple[int, int, int] | None = None   # a work-group size the kernel was compiled for
    self.launches = 0

  def make_shape(self, grid: tuple[int, int, int], block: tuple[int, int, int], timed: bool,
                 shared: int | None = None) -> LaunchShape:
    """The LaunchShape of these (checked) sizes: the launch queue program's command buffer (HCQDevice.launch_cmdbuf)
    for launch_handle(), then the vendor's shape_data. shared: the group-shared memory bytes of a launch whose
    arguments ask for shared blocks (after the kernel's static share), else None."""
    s = LaunchShape(grid, block, timed, shared)
    s.cmd = self.device.launch_cmdbuf(self.name, self.launch_handle(s), grid, block, timed)
    self.shape_data(s)
    return s

  def launch_handle(self, shape: LaunchShape):
    """What the launch queue program's call element carries to the vendor's lowering (the program by default)."""
    return self

  def shape_data(self, shape: LaunchShape) -> None:
    """The vendor's per-shape data, set on `shape` once (after its command buffer exists)."""

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
    if layout.dynamic_shared:
      shape = self.shape(global_size, local_size, timed, layout.shared_layout(args)[1])
    else:   # shape()'s cache, looked up here (a repeat launch makes no call for it)
      try: shape = self._shapes[(global_size, local_size, timed)]
      except (KeyError, TypeError): shape = self.shape(global_size, local_size, timed)
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
