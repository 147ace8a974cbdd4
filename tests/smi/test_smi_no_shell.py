"""Static checks of smi/: no shell anywhere, commands only as argument lists, and the OS (files, sysfs, procfs, lock
files) reached only through drivers/system, never directly."""
import ast
import pathlib

SMI = pathlib.Path(__file__).resolve().parents[2] / "smi"
SOURCES = sorted(SMI.rglob("*.py"))


def calls(tree):
  for node in ast.walk(tree):
    if not isinstance(node, ast.Call): continue
    f = node.func
    if isinstance(f, ast.Attribute):
      base = f.value.id if isinstance(f.value, ast.Name) else ast.unparse(f.value)
      yield f"{base}.{f.attr}", node
    elif isinstance(f, ast.Name): yield f.id, node


def test_there_are_sources():
  assert len(SOURCES) >= 5 and SMI / "cli.py" in SOURCES


def test_no_shell_in_smi():
  shells = {"os.system", "os.popen", "subprocess.getoutput", "subprocess.getstatusoutput", "pty.spawn", "os.execlp",
            "os.execvp", "os.execvpe", "os.spawnlp", "os.spawnvp", "os.posix_spawnp", "commands.getoutput"}
  bad = []
  for path in SOURCES:
    tree = ast.parse(path.read_text())
    for name, node in calls(tree):
      if name in shells: bad.append(f"{path.name}:{node.lineno}: {name}")
      for kw in node.keywords:
        if kw.arg == "shell" and not (isinstance(kw.value, ast.Constant) and kw.value.value is False):
          bad.append(f"{path.name}:{node.lineno}: shell={ast.unparse(kw.value)}")
    for node in ast.walk(tree):
      if isinstance(node, (ast.Import, ast.ImportFrom)):
        mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
        bad += [f"{path.name}:{node.lineno}: import {m}" for m in mods if m in ("pty", "commands", "pexpect", "sh")]
  assert not bad, "smi must not use a shell:\n" + "\n".join(bad)


def test_subprocess_gets_argument_lists_only():
  """Every subprocess call in smi passes a list (or a name bound to a list), never a string."""
  bad, seen = [], 0
  for path in SOURCES:
    tree = ast.parse(path.read_text())
    for name, node in calls(tree):
      if not name.startswith("subprocess."): continue
      seen += 1
      arg = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "args"), None)
      if isinstance(arg, (ast.Constant, ast.JoinedStr, ast.BinOp)) or arg is None:
        bad.append(f"{path.name}:{node.lineno}: {ast.unparse(node)}")
  assert seen >= 1
  assert not bad, "\n".join(bad)


def test_smi_reaches_the_os_only_through_drivers_system():
  direct = {"open", "os.open", "os.listdir", "os.scandir", "os.readlink", "os.stat", "os.lstat", "os.remove",
            "os.unlink", "os.path.exists", "os.path.realpath", "glob.glob", "os.walk", "io.open", "pathlib.Path"}
  bad = []
  for path in SOURCES:
    tree = ast.parse(path.read_text())
    for name, node in calls(tree):
      if name in direct: bad.append(f"{path.name}:{node.lineno}: {name}()")
    for node in ast.walk(tree):
      if isinstance(node, ast.Import): bad += [f"{path.name}:{node.lineno}: import {a.name}" for a in node.names
                                               if a.name in ("glob", "pathlib", "fcntl", "mmap", "ctypes", "shutil")]
  assert not bad, "smi must use drivers/system (LinuxOS) for files, sysfs, procfs and locks:\n" + "\n".join(bad)
