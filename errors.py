"""The exceptions hcq raises. Each names what failed: the device, the register, the address, the ioctl."""
from __future__ import annotations


class HCQError(Exception):
  """Base of every error hcq raises on purpose."""


class ConfigError(HCQError, ValueError):
  """An option (an environment variable, a Config field, a command-line value) hcq cannot use; names the option
  and the value. A usage error: the hcq command exits with status 2."""


class DeviceError(HCQError):
  """A device could not be opened or refused a request."""


class OSCallError(DeviceError):
  """An OS call (open, ioctl, mmap, sysfs, ...) failed; names the call and the errno."""

  def __init__(self, call: str, target: str, errno: int | None = None, detail: str = ""):
    import os
    self.call, self.target, self.errno = call, target, errno
    msg = f"{call} on {target} failed"
    if errno is not None: msg += f": [Errno {errno}] {os.strerror(errno)}"
    if detail: msg += f" ({detail})"
    super().__init__(msg)


class UnsafePathError(HCQError):
  """A folder or file hcq would trust (a cache of compiled kernels, the autogen package cache) is not safely its
  user's own: a symbolic link, another user's, or writable by others. Names the path, what is wrong, and the fix."""

  def __init__(self, path: str, problem: str, hint: str = ""):
    self.path, self.problem = path, problem
    msg = f"{path}: {problem}"
    if hint: msg += f"; {hint}"
    super().__init__(msg)


class GPUFault(DeviceError):
  """The device faulted (bad memory access, illegal instruction, ...)."""

  def __init__(self, message: str, address: int | None = None, kind: str = "fault"):
    self.address, self.kind = address, kind
    where = f" at address {address:#x}" if address is not None else ""
    super().__init__(f"GPU {kind}{where}: {message}")


class Timeout(HCQError, TimeoutError):
  """A wait did not complete in time; names what was waited for and the last value seen."""

  def __init__(self, what: str, expected=None, last_seen=None, timeout_s: float | None = None):
    self.what, self.expected, self.last_seen, self.timeout_s = what, expected, last_seen, timeout_s
    msg = f"timed out waiting for {what}"
    if expected is not None: msg += f" to reach {expected}"
    if last_seen is not None: msg += f" (last seen {last_seen})"
    if timeout_s is not None: msg += f" after {timeout_s:g} s"
    super().__init__(msg)


class QueueError(DeviceError):
  """A command queue hit a packet it cannot execute; names the opcode and the ring offset."""

  def __init__(self, queue: str, message: str, opcode: int | None = None, offset: int | None = None):
    self.queue, self.opcode, self.offset = queue, opcode, offset
    parts = [f"{queue}: {message}"]
    if opcode is not None: parts.append(f"opcode {opcode:#x}")
    if offset is not None: parts.append(f"at ring offset {offset:#x}")
    super().__init__(", ".join(parts))
