"""The layering rules of DESIGN.md §2, read from the imports of every module.

  autogen            <- compiler (ISA tables), drivers.system
  compiler           <- drivers.hcq, drivers.<vendor>
  drivers.system     <- drivers.hcq <- drivers.<vendor> <- smi, hcq.open
  drivers.system (interface only), autogen, compiler  <- mockgpu

errors, config and safefiles (hcq's private cache folders) are importable from anywhere.
Plus: only config.py reads environment variables; nothing uses a shell; only drivers/system touches the OS.
"""
import ast
import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGES = ["autogen", "cli", "compiler", "drivers", "mockgpu", "smi"]
BASE = {"errors", "config", "safefiles"}  # importable from anywhere


def modules():
  for top in PACKAGES:
    for path in sorted((ROOT / top).rglob("*.py")):
      if "fixtures" in path.parts: continue
      yield path
  for name in ("__init__.py", "config.py", "errors.py", "safefiles.py"):
    yield ROOT / name


def module_name(path: pathlib.Path) -> str:
  rel = path.relative_to(ROOT).with_suffix("")
  parts = list(rel.parts)
  if parts[-1] == "__init__": parts = parts[:-1]
  return ".".join(["hcq"] + parts)


def imports_of(path: pathlib.Path):
  """(imported hcq module without the 'hcq.' prefix, line) for every import of hcq code, relative ones resolved."""
  tree = ast.parse(path.read_text(), str(path))
  me = module_name(path).split(".")
  package = me if path.name == "__init__.py" else me[:-1]
  for node in ast.walk(tree):
    if isinstance(node, ast.ImportFrom):
      if node.level:
        base = package[:len(package) - (node.level - 1)]
        target = ".".join(base + ([node.module] if node.module else []))
        names = [target] if node.module else [f"{target}.{a.name}" for a in node.names]
      else:
        names = [node.module or ""]
      for n in names:
        if n == "hcq" or n.startswith("hcq."): yield n[4:], node.lineno
    elif isinstance(node, ast.Import):
      for a in node.names:
        if a.name == "hcq" or a.name.startswith("hcq."): yield a.name[4:], node.lineno


def layer(mod: str) -> str:
  """The layer of a module path (without 'hcq.'): 'drivers.amd', 'compiler', ..."""
  parts = mod.split(".") if mod else [""]
  if parts[0] == "drivers" and len(parts) > 1: return f"drivers.{parts[1]}"
  return parts[0]


def allowed(src: str, dst: str) -> bool:
  if dst in BASE or dst == src: return True
  if src == "": return True
  if dst == "": return src in ("smi", "cli")  # hcq/__init__.py: hcq.open may load any driver and the mock
  if src == "autogen": return False
  if src == "compiler": return dst == "autogen"
  if src == "drivers.system": return dst == "autogen"
  if src == "drivers.hcq": return dst in ("drivers.system", "compiler", "autogen")
  if src.startswith("drivers."): return dst in ("drivers.system", "drivers.hcq", "compiler", "autogen")
  if src == "mockgpu": return dst in ("drivers.system", "compiler", "autogen")
  if src in ("smi", "cli"): return dst != "mockgpu"  # hcq.open (dst "") is how tools reach devices
  return False


def test_layers():
  bad = []
  for path in modules():
    src = layer(module_name(path)[4:])
    for dst_mod, line in imports_of(path):
      if dst_mod == "": dst = ""
      else: dst = layer(dst_mod)
      if src == "" and path.name == "__init__.py" and path.parent == ROOT: continue
      if dst in BASE: continue
      if not allowed(src, dst): bad.append(f"{path.relative_to(ROOT)}:{line}: {src or 'hcq'} imports {dst_mod or 'hcq'}")
  assert not bad, "layering violations:\n" + "\n".join(bad)


def test_mockgpu_imports_only_the_interface_of_drivers_system():
  bad = []
  for path in (ROOT / "mockgpu").rglob("*.py"):
    for dst_mod, line in imports_of(path):
      if dst_mod.startswith("drivers.system") and dst_mod not in ("drivers.system", "drivers.system.interface",
                                                                  "drivers.system.libc", "drivers.system.locks", "drivers.system.mmio",
                                                                  "drivers.system.pciaddr"):
        bad.append(f"{path.relative_to(ROOT)}:{line}: {dst_mod}")
  assert not bad, "mockgpu may use only the OS interface definitions of drivers.system:\n" + "\n".join(bad)


def _os_module_names(tree) -> set[str]:
  """Names bound to the os module in this file (`import os`, `import os as _os`): a parameter named `os` that holds
  an OSInterface object is not the os module."""
  names = set()
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      names |= {a.asname or a.name for a in node.names if a.name == "os"}
  return names


def _calls(tree):
  for node in ast.walk(tree):
    if isinstance(node, ast.Call):
      f = node.func
      if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name): yield f"{f.value.id}.{f.attr}", node
      elif isinstance(f, ast.Name): yield f.id, node


def test_environment_is_read_only_in_config():
  bad = []
  for path in modules():
    if path == ROOT / "config.py": continue
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
      if isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv", "environb") and \
         isinstance(node.value, ast.Name) and node.value.id == "os":
        bad.append(f"{path.relative_to(ROOT)}:{node.lineno}: os.{node.attr}")
      if isinstance(node, ast.ImportFrom) and node.module == "os" and any(a.name in ("environ", "getenv") for a in node.names):
        bad.append(f"{path.relative_to(ROOT)}:{node.lineno}: from os import environ/getenv")
  assert not bad, "environment variables are read in config.py only:\n" + "\n".join(bad)


def test_no_shell_anywhere():
  bad = []
  for path in modules():
    tree = ast.parse(path.read_text())
    for name, node in _calls(tree):
      if name in ("os.system", "os.popen", "os.spawnlp", "os.execlp"): bad.append(f"{path.relative_to(ROOT)}:{node.lineno}: {name}")
      for kw in node.keywords:
        if kw.arg == "shell" and not (isinstance(kw.value, ast.Constant) and kw.value.value is False):
          bad.append(f"{path.relative_to(ROOT)}:{node.lineno}: shell=")
  assert not bad, "no shell: " + "\n".join(bad)


OS_MODULES = {"fcntl", "mmap", "usb", "subprocess", "ctypes.util"}
OS_CALLS = {"open", "os.open", "os.read", "os.write", "os.listdir", "os.readlink", "os.kill", "os.scandir",
            "os.stat", "os.lstat", "os.path.exists"}


@pytest.mark.parametrize("top", ["drivers", "autogen"])
def test_drivers_touch_the_os_only_through_the_interface(top):
  """Outside drivers/system, driver code reaches the OS only through the OSInterface object it was given.
  (autogen's generator is a build tool: only its runtime helpers are held to this. The compiler may run a C
  compiler: that is a build step, not device access.)"""
  bad = []
  for path in (ROOT / top).rglob("*.py"):
    rel = path.relative_to(ROOT)
    if rel.parts[:2] == ("drivers", "system"): continue
    if top == "autogen" and path.name not in ("__init__.py", "runtime.py"): continue
    if path.name == "build.py" or path.name.startswith("gen_"): continue  # build tools that make committed fixtures
    tree = ast.parse(path.read_text())
    os_names = _os_module_names(tree)
    for node in ast.walk(tree):
      if isinstance(node, ast.Import):
        bad += [f"{rel}:{node.lineno}: import {a.name}" for a in node.names if a.name in OS_MODULES]
      elif isinstance(node, ast.ImportFrom) and node.module in OS_MODULES and not node.level:
        bad.append(f"{rel}:{node.lineno}: from {node.module} import")
    for name, node in _calls(tree):
      head, _, attr = name.rpartition(".")
      if head and head in os_names: name = f"os.{attr}"
      elif head: continue
      if name in OS_CALLS: bad.append(f"{rel}:{node.lineno}: {name}()")
  assert not bad, "OS access outside the OS interface:\n" + "\n".join(bad)
