"""The virtual file system of a MockOS: directories, data files, device nodes and symbolic links under /dev, /sys
and /proc, all in memory.

A data file holds bytes, or computes them (`read=` a function) and reacts to writes (`write=` a function), which is
how sysfs attributes such as a PCI function's `enable` or `config` reach the device model. A device node holds an
`opener(path, flags) -> file object`; the object's ioctl/mmap/read/write are the device model's.
"""
from __future__ import annotations

import errno
import posixpath
from typing import Callable

from ..errors import OSCallError

MAX_SYMLINKS = 16


class Node:
  """A file-system entry."""
  kind = "node"


class Dir(Node):
  kind = "dir"

  def __init__(self):
    self.children: dict[str, Node] = {}


class DataFile(Node):
  """A regular (sysfs/proc) file. `data` is its content (bytes or str) unless `read` computes it; `write(bytes)`
  receives writes (without one, the file is read-only). `read_at(size, offset)` / `write_at(data, offset)` handle
  binary files with positioned access (a PCI config space); `opener` makes open() return a custom file object and
  `mmio(size, offset, name)` makes the file mappable with map_mmio (a BAR resource file)."""
  kind = "file"

  def __init__(self, data: bytes | str = b"", read: Callable[[], bytes | str] | None = None,
               write: Callable[[bytes], None] | None = None,
               read_at: Callable[[int, int], bytes] | None = None, write_at: Callable[[bytes, int], int] | None = None,
               opener=None, mmio=None, mode: int = 0o644):
    self._data = data.encode() if isinstance(data, str) else bytes(data)
    self._read, self._write, self.read_at, self.write_at = read, write, read_at, write_at
    self.opener, self.mmio, self.mode = opener, mmio, mode

  @property
  def writable(self) -> bool: return self._write is not None or self.write_at is not None

  def content(self) -> bytes:
    if self._read is None: return self._data
    value = self._read()
    return value.encode() if isinstance(value, str) else bytes(value)

  def set(self, data: bytes | str) -> None:
    self._data = data.encode() if isinstance(data, str) else bytes(data)

  def write(self, path: str, data: bytes) -> None:
    if self._write is None: raise OSCallError("write", path, errno.EACCES, "read-only file")
    self._write(bytes(data))


class DeviceNode(Node):
  """A character device (/dev/kfd, /dev/dri/renderD128): open() calls opener(path, flags)."""
  kind = "device"

  def __init__(self, opener, mmio=None):
    self.opener, self.mmio = opener, mmio


class Symlink(Node):
  kind = "link"

  def __init__(self, target: str):
    self.target = target


def _split(path: str) -> list[str]:
  return [p for p in path.split("/") if p and p != "."]


class VFS:
  """An in-memory tree. Paths are absolute ("/sys/bus/pci/devices"); symbolic links are followed like the kernel
  does (relative targets resolve against the link's directory)."""

  def __init__(self):
    self.root = Dir()

  # ---- lookup
  def _resolve(self, path: str, follow_last: bool = True) -> tuple[Node, str]:
    """(node, canonical path) or OSCallError ENOENT/ENOTDIR/ELOOP naming the path."""
    if not path.startswith("/"): raise OSCallError("lookup", path, errno.EINVAL, "mock paths are absolute")
    todo = _split(path)
    node, where, hops = self.root, [], 0
    while todo:
      name = todo.pop(0)
      if name == "..":
        if where: where.pop()
        node = self._walk(where, path)
        continue
      if not isinstance(node, Dir): raise OSCallError("lookup", path, errno.ENOTDIR)
      child = node.children.get(name)
      if child is None: raise OSCallError("lookup", path, errno.ENOENT)
      if isinstance(child, Symlink) and (todo or follow_last):
        hops += 1
        if hops > MAX_SYMLINKS: raise OSCallError("lookup", path, errno.ELOOP)
        target = _split(child.target)
        if child.target.startswith("/"): where = []
        todo = target + todo
        node = self._walk(where, path)
        continue
      where.append(name)
      node = child
    return node, "/" + "/".join(where)

  def _walk(self, parts: list[str], path: str) -> Node:
    node = self.root
    for p in parts:
      if not isinstance(node, Dir) or p not in node.children: raise OSCallError("lookup", path, errno.ENOENT)
      node = node.children[p]
    return node

  def lookup(self, path: str, follow: bool = True) -> Node: return self._resolve(path, follow)[0]

  def realpath(self, path: str) -> str: return self._resolve(path)[1]

  def exists(self, path: str, follow: bool = True) -> bool:
    try: self._resolve(path, follow)
    except OSCallError: return False
    return True

  def listdir(self, path: str) -> list[str]:
    node = self.lookup(path)
    if not isinstance(node, Dir): raise OSCallError("listdir", path, errno.ENOTDIR)
    return sorted(node.children)

  def readlink(self, path: str) -> str:
    node = self.lookup(path, follow=False)
    if not isinstance(node, Symlink): raise OSCallError("readlink", path, errno.EINVAL, "not a symbolic link")
    return node.target

  # ---- building
  def mkdir(self, path: str) -> Dir:
    """Create a directory and its parents (existing directories are fine)."""
    node = self.root
    for i, name in enumerate(_split(path)):
      child = node.children.get(name)
      if child is None: child = node.children[name] = Dir()
      elif isinstance(child, Symlink): child = self.lookup("/" + "/".join(_split(path)[:i + 1]))
      if not isinstance(child, Dir): raise OSCallError("mkdir", path, errno.ENOTDIR)
      node = child
    return node

  def add(self, path: str, node: Node, replace: bool = False) -> Node:
    parent, name = posixpath.split(path.rstrip("/"))
    d = self.mkdir(parent)
    if name in d.children and not replace: raise OSCallError("create", path, errno.EEXIST)
    d.children[name] = node
    return node

  def add_file(self, path: str, data: bytes | str = b"", replace: bool = False, **kw) -> DataFile:
    return self.add(path, DataFile(data, **kw), replace=replace)

  def add_symlink(self, path: str, target: str, replace: bool = False) -> Symlink:
    return self.add(path, Symlink(target), replace=replace)

  def remove(self, path: str) -> None:
    parent, name = posixpath.split(path.rstrip("/"))
    d = self.lookup(parent)
    if not isinstance(d, Dir) or name not in d.children: raise OSCallError("remove", path, errno.ENOENT)
    del d.children[name]
