"""The layering rules of DESIGN.md §2, read from the imports of every module.

  autogen            <- compiler (ISA tables), drivers.system
  compiler           <- drivers.hcq, drivers.<vendor>
  drivers.system     <- drivers.hcq <- drivers.<vendor> <- smi, hcq.open
  drivers.system (interface only), autogen, compiler  <- mockgpu

errors, config and safefiles (hcq's private cache folders) are importable from anywhere.
Plus: only config.py reads environment variables; nothing uses a shell; only drivers/system touches the OS; nothing
outside tests/ and hcq.open reaches mockgpu (bench/ included: a benchmark opens "MOCK+AMD" like any user); the generic
runtime drivers/hcq names no vendor; no driver learns that it runs on a mock (no string, name or attribute that
says mock outside its DRIVER declaration); no import cycles anywhere in the package, imports inside functions counted.

Each rule is a function of a parsed module that returns its findings; the `test_plant_*` tests feed each one small
modules that break the rule in the ways it must see through (aliases, getattr, dynamic imports) and a clean one.
"""
import ast
import contextlib
import functools
import gc
import os
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGES = ["autogen", "cli", "compiler", "drivers", "mockgpu", "smi"]
BASE = {"errors", "config", "safefiles"}  # importable from anywhere
# benchmarks of the mock itself: their subject is mockgpu's internals (its queue engines, per-stage timers wrapped
# around its functions), which hcq.open does not expose. Every other bench script reaches devices through hcq.open.
MOCK_BENCHES = {"mock_launch_profile.py", "mock_queues.py", "ptx_interp.py",
                "usb.py"}   # the bridge alone (TLPs/s, copies) is the mock USB bridge with its simple endpoint, not a device


def modules():
  for top in PACKAGES:
    for path in sorted((ROOT / top).rglob("*.py")):
      if "fixtures" in path.parts: continue
      yield path
  for name in ("__init__.py", "config.py", "errors.py", "safefiles.py"):
    yield ROOT / name


def bench_scripts():
  return sorted((ROOT / "bench").glob("*.py"))


def code_files():
  """Every file held to the package-wide rules (environment, shell, mockgpu): the modules and the bench scripts."""
  yield from modules()
  yield from bench_scripts()


def parse(path: pathlib.Path) -> ast.Module:
  """The file's syntax tree, parsed once per session for every rule that reads it (the rules only read trees; a
  file changed since is parsed again: the key holds its modification time and size)."""
  st = path.stat()
  return _parse(str(path), st.st_mtime_ns, st.st_size)


_NODES: dict = {}


def _walk(tree) -> list:
  """ast.walk(tree) as a list, made once per tree (kept with it) and shared by the rules: the generated modules
  (autogen, ~8 MB of source) make a walk cost seconds."""
  entry = _NODES.get(id(tree))
  if entry is None or entry[0] is not tree:
    with _collector_paused(): entry = _NODES[id(tree)] = (tree, list(ast.walk(tree)))
  return entry[1]


@contextlib.contextmanager
def _collector_paused():
  """The cyclic collector paused while trees and their node lists are built: they hold no cycles to collect, and
  the generated modules' million nodes would otherwise set off full collections of the whole test session's heap
  (three quarters of the time the rules take)."""
  was_enabled = gc.isenabled()
  gc.disable()
  try: yield
  finally:
    if was_enabled: gc.enable()


@pytest.fixture(autouse=True, scope="module")
def _drop_trees():
  """The shared trees (~200 MB) live while this module's tests run, not for the rest of the session."""
  yield
  _NODES.clear()
  _parse.cache_clear()


@functools.lru_cache(maxsize=None)
def _parse(path: str, mtime_ns: int, size: int) -> ast.Module:
  with open(path, encoding="utf-8") as f: source = f.read()
  with _collector_paused(): return ast.parse(source, path)


def module_name(path: pathlib.Path) -> str:
  rel = path.relative_to(ROOT).with_suffix("")
  parts = list(rel.parts)
  if parts[-1] == "__init__": parts = parts[:-1]
  return ".".join(["hcq"] + parts)


def _is_module(dotted: str) -> bool:
  """Whether an hcq dotted name is a module or package on disk (not a name defined inside one)."""
  parts = dotted.split(".")
  if parts[0] != "hcq" or len(parts) < 2: return False
  rel = ROOT.joinpath(*parts[1:])
  return rel.with_suffix(".py").is_file() or (rel / "__init__.py").is_file()


def imports_in(tree: ast.Module, package: list[str] | None, is_module=None):
  """(dotted module, line) for every import in tree (at module level or inside a function, a class or a branch),
  relative ones resolved against package (None: a script, whose relative imports cannot resolve). `from P import n`
  names P.n when that is a module (is_module(P.n); default: a file of this repository), else P: `from hcq import
  mockgpu` is an import of hcq.mockgpu, `from hcq import open` one of hcq."""
  is_module = is_module or _is_module
  for node in _walk(tree):
    if isinstance(node, ast.ImportFrom):
      if node.level:
        if package is None: continue
        base = ".".join(package[:len(package) - (node.level - 1)] + ([node.module] if node.module else []))
      else: base = node.module or ""
      for a in node.names:
        full = f"{base}.{a.name}"
        yield (full if a.name != "*" and is_module(full) else base), node.lineno
    elif isinstance(node, ast.Import):
      for a in node.names: yield a.name, node.lineno


def imports_of(path: pathlib.Path):
  """(imported hcq module without the 'hcq.' prefix, line) for every import of hcq code, relative ones resolved."""
  me = module_name(path).split(".")
  package = me if path.name == "__init__.py" else me[:-1]
  for n, line in imports_in(parse(path), package):
    if n == "hcq" or n.startswith("hcq."): yield n[4:], line


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


# ---- no import cycles, counting the imports inside functions (a lazy import still ties two modules together)

def import_graph(trees: dict) -> dict[str, dict[str, int]]:
  """{module: {imported module: line}} over trees ({dotted module name: (syntax tree, is a package)}), every import
  of one of those modules counted wherever it is written; a module's import of itself is no edge."""
  known = set(trees)
  graph = {}
  for name, (tree, is_package) in trees.items():
    me = name.split(".")
    edges = graph[name] = {}
    for dst, line in imports_in(tree, me if is_package else me[:-1], known.__contains__):
      if dst in known and dst != name: edges.setdefault(dst, line)
  return graph


def import_cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
  """The strongly connected components of more than one module (Tarjan's algorithm, iterative): each holds at least
  one cycle of imports. Sorted, each sorted."""
  index, low, stack, on_stack, found = {}, {}, [], set(), []
  for root in sorted(graph):
    if root in index: continue
    work = [(root, iter(sorted(graph[root])))]
    index[root] = low[root] = len(index)
    stack.append(root)
    on_stack.add(root)
    while work:
      v, children = work[-1]
      w = next(children, None)
      if w is not None:
        if w not in index:
          index[w] = low[w] = len(index)
          stack.append(w)
          on_stack.add(w)
          work.append((w, iter(sorted(graph.get(w, ())))))
        elif w in on_stack: low[v] = min(low[v], index[w])
        continue
      work.pop()
      if work: low[work[-1][0]] = min(low[work[-1][0]], low[v])
      if low[v] == index[v]:
        comp = []
        while True:
          w = stack.pop()
          on_stack.discard(w)
          comp.append(w)
          if w == v: break
        if len(comp) > 1: found.append(sorted(comp))
  return sorted(found)


def _cycle_text(graph, comp: list[str]) -> str:
  inside = set(comp)
  return "\n".join(f"  {a} -> {b} (line {graph[a][b]})" for a in comp for b in sorted(graph[a]) if b in inside)


def package_trees() -> dict:
  return {module_name(p): (parse(p), p.name == "__init__.py") for p in modules()}


def test_no_import_cycles():
  graph = import_graph(package_trees())
  assert len(graph) > 300, "the import graph must cover the whole package"
  cycles = import_cycles(graph)
  assert not cycles, f"{len(cycles)} import cycle(s) (docs/DESIGN.md §2):\n" + \
    "\n".join(f"{' <-> '.join(c)}:\n{_cycle_text(graph, c)}" for c in cycles)


def test_mockgpu_imports_only_the_interface_of_drivers_system():
  bad = []
  for path in (ROOT / "mockgpu").rglob("*.py"):
    for dst_mod, line in imports_of(path):
      if dst_mod.startswith("drivers.system") and dst_mod not in ("drivers.system", "drivers.system.interface",
                                                                  "drivers.system.libc", "drivers.system.locks", "drivers.system.mmio",
                                                                  "drivers.system.interrupts",
                                                                  "drivers.system.pciaddr",
                                                                  "drivers.system.pcie", "drivers.system.usb"):
        bad.append(f"{path.relative_to(ROOT)}:{line}: {dst_mod}")
  assert not bad, "mockgpu may use only the OS interface definitions of drivers.system:\n" + "\n".join(bad)


# ---- what the rules below share: names bound to the os module, calls, string values of expressions

def _os_module_names(tree) -> set[str]:
  """Names bound to the os module in this file (`import os`, `import os as _os`, `import os.path`): a parameter named
  `os` that holds an OSInterface object is not the os module."""
  names = set()
  for node in _walk(tree):
    if isinstance(node, ast.Import):
      for a in node.names:
        if a.name == "os": names.add(a.asname or "os")
        elif a.name.startswith("os.") and not a.asname: names.add("os")   # `import os.path` binds os
  return names


def _calls(tree):
  for node in _walk(tree):
    if isinstance(node, ast.Call):
      f = node.func
      if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name): yield f"{f.value.id}.{f.attr}", node
      elif isinstance(f, ast.Name): yield f.id, node


def _docstrings(tree) -> set[int]:
  """ids of the string constants that are statements on their own (docstrings, commented-out text): they do nothing."""
  return {id(n.value) for n in _walk(tree)
          if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)}


def _str_value(node) -> str | None:
  """The value of a string expression built from constants ("hcq." + "mockgpu", f"{'mock'}gpu", "".join([...]),
  "%s" % "x"), else None."""
  if isinstance(node, ast.Constant): return node.value if isinstance(node.value, str) else None
  if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
    a, b = _str_value(node.left), _str_value(node.right)
    return a + b if a is not None and b is not None else None
  if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
    fmt = _str_value(node.left)
    args = [_str_value(e) for e in (node.right.elts if isinstance(node.right, ast.Tuple) else [node.right])]
    if fmt is None or None in args: return None
    try: return fmt % tuple(args)
    except (TypeError, ValueError): return None
  if isinstance(node, ast.JoinedStr):
    parts = [_str_value(v.value if isinstance(v, ast.FormattedValue) else v) for v in node.values]
    return "".join(parts) if None not in parts else None
  if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "join" and \
     len(node.args) == 1 and isinstance(node.args[0], (ast.List, ast.Tuple)):
    sep, parts = _str_value(node.func.value), [_str_value(e) for e in node.args[0].elts]
    return sep.join(parts) if sep is not None and None not in parts else None
  return None


def _strings(tree):
  """(node, value) for every string expression of the code (docstrings excluded) whose value is known."""
  skip = _docstrings(tree)
  for node in _walk(tree):
    if id(node) in skip: continue
    value = _str_value(node)
    if value is not None: yield node, value


# ---- only config.py reads the environment

ENV_NAMES = {"environ", "environb", "getenv", "getenvb", "putenv", "unsetenv"}


def env_reads(tree) -> list[str]:
  """Every way of reaching the process environment, whatever the os module is called: an attribute named environ,
  getenv, ... (os.environ, _os.getenv, os.environ.get, posix.environ, libc.getenv), a from-import of one of them
  (under any alias), and those names as strings (getattr(os, "environ"), vars(os)["getenv"])."""
  found = []
  for node in _walk(tree):
    if isinstance(node, ast.Attribute) and node.attr in ENV_NAMES: found.append(f"{node.lineno}: .{node.attr}")
    elif isinstance(node, ast.ImportFrom):
      for a in node.names:
        if a.name in ENV_NAMES or (a.name == "*" and node.module in ("os", "posix", "nt")):
          found.append(f"{node.lineno}: from {node.module} import {a.name}")
  for node, value in _strings(tree):
    if value in ENV_NAMES: found.append(f"{node.lineno}: {value!r}")
  return found


def test_environment_is_read_only_in_config():
  bad = []
  for path in code_files():
    if path == ROOT / "config.py": continue
    bad += [f"{path.relative_to(ROOT)}:{f}" for f in env_reads(parse(path))]
  assert not bad, "environment variables are read in config.py only:\n" + "\n".join(bad)


# ---- no shell

SHELL_CALLS = {"system", "popen", "spawnlp", "spawnlpe", "spawnvp", "spawnvpe", "execlp", "execlpe", "execvp",
               "execvpe"}


def shell_uses(tree) -> list[str]:
  """os.system and friends (under any name of the os module, or from-imported), and shell= other than False."""
  found, os_names = [], _os_module_names(tree)
  for node in _walk(tree):
    if isinstance(node, ast.ImportFrom) and node.module == "os":
      found += [f"{node.lineno}: from os import {a.name}" for a in node.names if a.name in SHELL_CALLS]
  for name, node in _calls(tree):
    head, _, attr = name.rpartition(".")
    if head in os_names and attr in SHELL_CALLS: found.append(f"{node.lineno}: os.{attr}")
    for kw in node.keywords:
      if kw.arg == "shell" and not (isinstance(kw.value, ast.Constant) and kw.value.value is False):
        found.append(f"{node.lineno}: shell=")
  return found


def test_no_shell_anywhere():
  bad = []
  for path in code_files(): bad += [f"{path.relative_to(ROOT)}:{f}" for f in shell_uses(parse(path))]
  assert not bad, "no shell: " + "\n".join(bad)


# ---- nothing outside tests/ and hcq.open reaches mockgpu

def mockgpu_uses(tree, package: list[str] | None) -> list[str]:
  """Imports of hcq.mockgpu (`from hcq import mockgpu` included), the name mockgpu as a variable or attribute
  (hcq.mockgpu once hcq.open has loaded it), and any string of the code that names it: the argument of
  importlib.import_module / __import__ / sys.modules[...], whether a constant or built from constants."""
  found = []
  for mod, line in imports_in(tree, package):
    if mod == "hcq.mockgpu" or mod.startswith("hcq.mockgpu."): found.append(f"{line}: import {mod}")
  for node in _walk(tree):
    if isinstance(node, ast.Attribute) and node.attr == "mockgpu": found.append(f"{node.lineno}: .mockgpu")
    elif isinstance(node, ast.Name) and node.id == "mockgpu": found.append(f"{node.lineno}: name mockgpu")
  for node, value in _strings(tree):
    if "mockgpu" in value: found.append(f"{node.lineno}: {value!r}")
  return sorted(set(found), key=lambda f: int(f.split(":")[0]))


def _may_reach_mockgpu(path: pathlib.Path) -> bool:
  rel = path.relative_to(ROOT)
  return rel.parts[0] == "mockgpu" or path == ROOT / "__init__.py" or (rel.parts[0] == "bench" and path.name in MOCK_BENCHES)


def test_nothing_but_hcq_open_reaches_mockgpu():
  bad = []
  for path in code_files():
    if _may_reach_mockgpu(path): continue
    if path.parent == ROOT / "bench": package = None
    else:
      me = module_name(path).split(".")
      package = me if path.name == "__init__.py" else me[:-1]
    bad += [f"{path.relative_to(ROOT)}:{f}" for f in mockgpu_uses(parse(path), package)]
  assert not bad, "only tests/ and hcq.open reach mockgpu (bench scripts open MOCK+AMD):\n" + "\n".join(bad)


# ---- the generic runtime names no vendor

# inside any identifier, any case (sdma_ring, PM4Packet, is_gfx11); and, as whole words of an identifier split at _
# and case changes (AMDQueue -> AMD, Queue; nv_class -> nv, class; but env, inv, canvas are no vendor)
VENDOR_WORDS = re.compile(r"kfd|pm4|sdma|gfx|amdgpu", re.IGNORECASE)
VENDOR_NAMES = {"amd", "hsa", "nv", "nvidia", "qcom", "bnxt"}
VENDOR_MODULES = re.compile(r"amd\w*|nv|nvidia|qcom|bnxt", re.IGNORECASE)   # drivers.amd, autogen.amdgpu_drm, ...


def _words(name: str) -> list[str]:
  return [w.lower() for w in re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+", name)]


def _names_vendor(name: str) -> bool:
  return bool(VENDOR_WORDS.search(name)) or any(w in VENDOR_NAMES for w in _words(name))


def vendor_identifiers(tree, module: str) -> list[str]:
  """Identifiers of a module (its own name, classes, functions, arguments, variables, attributes, keywords, imported
  modules and names) that name a vendor's hardware or interface: KFD, PM4, SDMA, gfx (any case, inside a longer
  name too), AMD, HSA, NV, NVIDIA, QCOM, BNXT (as words of a name), and imports of vendor modules (a component
  amd*, nv, qcom, bnxt). Strings and comments may mention them as examples."""
  found = []
  def check(line, kind, name):
    if name and _names_vendor(name): found.append(f"{line}: {kind} {name}")
  check(0, "module", module)
  for node in _walk(tree):
    line = getattr(node, "lineno", 0)
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)): check(line, "def", node.name)
    elif isinstance(node, ast.arg): check(line, "argument", node.arg)
    elif isinstance(node, ast.Name): check(line, "name", node.id)
    elif isinstance(node, ast.Attribute): check(line, "attribute", node.attr)
    elif isinstance(node, ast.keyword): check(line, "keyword", node.arg)
    elif isinstance(node, (ast.Global, ast.Nonlocal)):
      for n in node.names: check(line, "name", n)
    elif isinstance(node, (ast.Import, ast.ImportFrom)):
      mod = getattr(node, "module", None) or ""
      names = [mod] + [p for a in node.names for p in (a.name, a.asname)]
      for n in names:
        if n and (_names_vendor(n) or any(VENDOR_MODULES.fullmatch(p) for p in n.split("."))):
          found.append(f"{line}: import {n}")
  return found


def test_generic_runtime_names_no_vendor_checker_sees_the_tree():
  """The vendor check reads every file of drivers/hcq (it would pass vacuously on an empty or moved folder)."""
  files = sorted((ROOT / "drivers" / "hcq").glob("*.py"))
  assert {p.name for p in files} >= {"__init__.py", "device.py", "runtime.py", "engine.py", "program.py", "ring.py", "signal.py"}


def test_generic_runtime_names_no_vendor():
  bad = []
  for path in sorted((ROOT / "drivers" / "hcq").glob("*.py")):
    bad += [f"{path.relative_to(ROOT)}:{f}" for f in vendor_identifiers(parse(path), path.stem)]
  assert not bad, "vendor names in the generic runtime drivers/hcq:\n" + "\n".join(bad)


# ---- no driver learns that it runs on a mock

def _declaration_nodes(tree) -> set[int]:
  """ids of the nodes of the module's `DRIVER = Driver(...)` declaration (its mock spec names and entry belong there)."""
  inside = set()
  for node in _walk(tree):
    if isinstance(node, (ast.Assign, ast.AnnAssign)):
      targets = node.targets if isinstance(node, ast.Assign) else [node.target]
      if any(isinstance(t, ast.Name) and t.id == "DRIVER" for t in targets) and node.value is not None:
        inside |= {id(n) for n in ast.walk(node.value)}
  return inside


def mock_knowledge(tree) -> list[str]:
  """Every way a driver module could learn that it runs on the embedded mock, outside its DRIVER declaration: a
  string that says mock (any case, built from constants too: label.startswith("MOCK"), "MO" + "CK" in spec, a
  compare of a label's part with "mock") and a name, attribute, argument or keyword that says it (spec.is_mock,
  Interface.mocks, config.nv_mock_gpu). A driver gets an OS interface object and a label for its errors; what
  stands behind the object is hcq.open's business (docs/DESIGN.md §2)."""
  found, skip = [], _declaration_nodes(tree)
  for node, value in _strings(tree):
    if id(node) not in skip and "mock" in value.lower(): found.append(f"{node.lineno}: {value!r}")
  for node in _walk(tree):
    if id(node) in skip: continue
    name = (node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute)
            else node.arg if isinstance(node, (ast.arg, ast.keyword)) else None)
    if name and "mock" in name.lower(): found.append(f"{node.lineno}: {name}")
  return sorted(set(found), key=lambda f: int(f.split(":")[0]))


def test_no_driver_learns_it_runs_on_a_mock():
  """Outside drivers/hcq/registry.py (the declaration's schema: Interface.mocks, Interface.mock, which hcq.open
  reads), no driver module mentions the mock but in its DRIVER declaration."""
  bad, declared = [], 0
  for path in sorted((ROOT / "drivers").rglob("*.py")):
    if path == ROOT / "drivers" / "hcq" / "registry.py": continue
    tree = parse(path)
    declared += bool(_declaration_nodes(tree))
    bad += [f"{path.relative_to(ROOT)}:{f}" for f in mock_knowledge(tree)]
  assert declared >= 5, "the check must see the drivers' DRIVER declarations"
  assert not bad, "a driver must not know whether it runs on a mock:\n" + "\n".join(bad)


MOCK_KNOWLEDGE_PLANTS = [
  "def open_device(iface, index, os, config, label=None):\n  if label.startswith('MOCK'): index = 0",
  "class D:\n  def f(self):\n    if 'MOCK' in self.label: return 1",
  "def f(spec):\n  return spec.iface == 'MO' + 'CK'",
  "def f(label):\n  return label.split('+')[0].lower() == 'mock'",
  "def f(label):\n  return label[:4] == f\"{'MO'}CK\"",
  "def f(spec):\n  if spec.is_mock: return 1",
  "from . import DRIVER\ndef f(label):\n  return label.partition('+')[0] in DRIVER.interfaces[0].mocks",
  "def f(config):\n  return config.nv_mock_gpu is not None",
  "import re\ndef f(label):\n  return re.match('MO' 'CK', label)",
  "def f(*, on_mock=False):\n  return on_mock",
  "import hcq\ndef f(label):\n  return hcq.parse_spec(label).is_mock",
]
MOCK_KNOWLEDGE_CLEAN = '''"""A driver: a docstring may say that hcq.open("MOCK+X") opens it on the mock."""
DRIVER = Driver(vendor="X", module=__name__, summary="x", default="PCI",
                interfaces=(Interface("PCI", "the function", mocks=("MOCK", "MOCKPCI"), mock="x.pci_os"),))
def open_device(iface, index, os, config, label=None):
  label = label or f"PCI+X:{index}"          # named in errors, never inspected
  if iface != "PCI": raise ValueError(f"{label}: no interface {iface}")
  return os.open(f"/dev/x{index}")
'''


@pytest.mark.parametrize("source", MOCK_KNOWLEDGE_PLANTS)
def test_plant_driver_mock_knowledge_is_caught(source):
  assert _findings(mock_knowledge, source), f"not caught:\n{source}"


def test_plant_driver_mock_knowledge_clean_module_passes():
  assert _findings(mock_knowledge, MOCK_KNOWLEDGE_CLEAN) == []


# ---- drivers reach the OS only through the OS interface

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
    tree = parse(path)
    os_names = _os_module_names(tree)
    for node in _walk(tree):
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


# ---- tests of the tests: each rule sees planted violations (as source text) and passes a clean module

def _findings(rule, source: str, *args) -> list[str]:
  return rule(ast.parse(source), *args)


ENV_PLANTS = [
  "import os as _os\nx = _os.environ['HOME']",
  "import os as _os\nx = _os.getenv('HOME')",
  "from os import environ as e\nx = e['HOME']",
  "from os import getenv as g\nx = g('HOME')",
  "import os\nx = os.environ.get('HOME')",
  "import os\nx = getattr(os, 'environ')",
  "import os\nx = getattr(os, 'env' + 'iron')['HOME']",
  "import os\nx = vars(os)['getenv']('HOME')",
  "import os.path\nx = os.environ['HOME']",
  "import os.path as p\nx = p.os.environ['HOME']",
  "import posix\nx = posix.environ[b'HOME']",
  "from os import *\nx = environ['HOME']",
  "import os\nos.putenv('A', '1')",
  "import importlib\nx = importlib.import_module('os').environ",
  "import ctypes\nx = ctypes.CDLL(None).getenv(b'HOME')",
]
ENV_CLEAN = '''"""Reads no environment: os.environ is read in config.py (a docstring may say so)."""
import os
import subprocess
env = {"HCQ_DEV": "MOCK+AMD"}          # a dict named env is not the environment
path = os.path.join("a", "b")
subprocess.run(["true"], env=env)       # the child gets what we give it
def read(os, fd): return os.read(fd)    # an OS interface object named os
'''


@pytest.mark.parametrize("source", ENV_PLANTS)
def test_plant_environment_read_is_caught(source):
  assert _findings(env_reads, source), f"not caught:\n{source}"


def test_plant_environment_clean_module_passes():
  assert _findings(env_reads, ENV_CLEAN) == []
  assert env_reads(parse(ROOT / "config.py")), "the checker must see config.py's own read of os.environ"


MOCKGPU_PLANTS = [
  ("import importlib\nm = importlib.import_module('hcq.mockgpu')", None),
  ("import importlib\nm = importlib.import_module('.mockgpu', 'hcq')", None),
  ("m = __import__('hcq.mockgpu.amd.emu')", None),
  ("from importlib import import_module as im\nm = im('hcq.' + 'mock' + 'gpu')", None),
  ("import importlib\nm = importlib.import_module(f\"hcq.{'mockgpu'}.amd\")", None),
  ("import importlib\nm = importlib.import_module('.'.join(['hcq', 'mockgpu', 'amd']))", None),
  ("import importlib\nm = importlib.import_module('hcq.%s' % 'mockgpu')", None),
  ("import importlib\nNAME = 'hcq.mockgpu'\nm = importlib.import_module(NAME)", None),
  ("import sys\nm = sys.modules['hcq.mockgpu.amd.emu']", None),
  ("import importlib.util\ns = importlib.util.find_spec('hcq.mockgpu')", None),
  ("import hcq.mockgpu.amd.emu as emu", None),
  ("from hcq.mockgpu.amd.emu import GPUMemory", None),
  ("from hcq import mockgpu", None),
  ("import hcq\ndev = hcq.open('MOCK+AMD')\nm = hcq.mockgpu.amd.emu", None),
  ("from .. import mockgpu", ["hcq", "smi"]),
  ("from ..mockgpu.amd import emu", ["hcq", "smi"]),
  ("from ...mockgpu import MockOS", ["hcq", "drivers", "amd"]),
]
MOCKGPU_CLEAN = '''"""Drives the emulator from outside: hcq.open("MOCK+AMD") loads mockgpu, nothing here imports it."""
import importlib
import hcq
from hcq import open as hcq_open
from hcq.compiler.isa.amd.decode import decode_all
dev = hcq.open("MOCK+AMD")             # the mock comes in through hcq.open
driver = importlib.import_module("hcq.drivers.amd")
name = "MOCK+AMD"
'''


@pytest.mark.parametrize("source,package", MOCKGPU_PLANTS)
def test_plant_mockgpu_reach_is_caught(source, package):
  assert _findings(mockgpu_uses, source, package), f"not caught:\n{source}"


def test_plant_mockgpu_clean_module_passes():
  assert _findings(mockgpu_uses, MOCKGPU_CLEAN, None) == []
  assert mockgpu_uses(parse(ROOT / "__init__.py"), ["hcq"]), "the checker must see hcq.open's own import of mockgpu"


def test_bench_scripts_are_checked():
  """bench/ is held to the environment, shell and mockgpu rules: the checks read its scripts."""
  names = {p.name for p in code_files() if p.parent == ROOT / "bench"}
  assert {"emu.py", "codegen.py", "launch.py"} <= names
  assert MOCK_BENCHES <= names, "an exempted mock benchmark is gone: drop it from MOCK_BENCHES"


SHELL_PLANTS = [
  "import os\nos.system('ls')",
  "import os as _os\n_os.system('ls')",
  "import os.path\nos.popen('ls')",
  "from os import system\nsystem('ls')",
  "from os import popen as p\np('ls')",
  "import subprocess\nsubprocess.run('ls', shell=True)",
  "import subprocess as sp\nsp.Popen('ls', shell=1)",
]
SHELL_CLEAN = '''import subprocess
subprocess.run(["ls", "-l"], shell=False)
subprocess.run(["ls"])
def f(os): return os.system_info()   # an OS interface object, not the os module
'''


@pytest.mark.parametrize("source", SHELL_PLANTS)
def test_plant_shell_is_caught(source):
  assert _findings(shell_uses, source), f"not caught:\n{source}"


def test_plant_shell_clean_module_passes():
  assert _findings(shell_uses, SHELL_CLEAN) == []


VENDOR_PLANTS = [
  ("class KFDQueue:\n  pass", "queue"),
  ("class AMDRing:\n  pass", "queue"),
  ("def submit_pm4(words):\n  pass", "queue"),
  ("async def sdma_copy():\n  pass", "queue"),
  ("def f(sdma_ring):\n  pass", "queue"),
  ("def f(*, nv_class=0):\n  pass", "queue"),
  ("def f(**gfx_opts):\n  pass", "queue"),
  ("GFX_VERSION = 11", "queue"),
  ("def f(ring):\n  ring.pm4_engine = 1", "queue"),
  ("def f(ring):\n  return ring.hsa_queue", "queue"),
  ("x = g(kfd_fd=3)", "queue"),
  ("def f():\n  global kfd_handle\n  kfd_handle = 1", "queue"),
  ("for Gfx11Reg in range(3):\n  pass", "queue"),
  ("x = 1", "pm4"),
  ("x = 1", "sdma_ring"),
  ("from ..amd import device", "queue"),
  ("from ..amd.pm4 import Packet", "queue"),
  ("import hcq.drivers.nv", "queue"),
  ("from hcq.autogen import kfd", "queue"),
  ("from hcq.autogen import amdgpu_drm as drm", "queue"),
  ("from hcq.compiler.isa.amd import codeobject", "queue"),
  ("from .queue import Ring as PM4Ring", "queue"),
]
VENDOR_CLEAN = '''"""Rings of a vendor's engines: PM4 (AMD compute), SDMA copies, NV GPFIFO; gfx1100 and KFD are examples."""
# the KFD event page, the PM4 RELEASE_MEM packet: examples in comments are fine
from .signal import Signal
ENV_NAME = "gfx1100"                    # a string may name one
class Ring:
  def __init__(self, env, inv, canvas, conv):
    self.doorbell = env.doorbell("PM4")
def advance(ring, words): return ring.write(words)
'''


@pytest.mark.parametrize("source,module", VENDOR_PLANTS)
def test_plant_vendor_name_is_caught(source, module):
  assert _findings(vendor_identifiers, source, module), f"not caught in module {module}:\n{source}"


def test_plant_vendor_clean_module_passes():
  assert _findings(vendor_identifiers, VENDOR_CLEAN, "queue") == []


def _plant_graph(sources: dict[str, str]) -> dict:
  """The import graph of planted modules: {dotted name: source}; a name ending in .__init__ is a package."""
  trees = {}
  for name, source in sources.items():
    package = name.endswith(".__init__")
    trees[name.removesuffix(".__init__")] = (ast.parse(source), package)
  return import_graph(trees)


CYCLE_PLANTS = [
  {"hcq.a": "from .b import f", "hcq.b": "def f():\n  from .a import g\n  return g"},          # lazy on one side
  {"hcq.a": "import hcq.b", "hcq.b": "class C:\n  def m(self):\n    import hcq.c", "hcq.c": "from hcq.a import x"},
  {"hcq.p.__init__": "def run():\n  from .engine import go", "hcq.p.engine": "from . import Stats"},  # package <-> module
  {"hcq.p.__init__": "", "hcq.p.x": "from . import y", "hcq.p.y": "if True:\n  from hcq.p import x"},
]
CYCLE_CLEAN = {"hcq.p.__init__": "from .x import f\ndef g():\n  from .y import h", "hcq.p.x": "from .z import k",
               "hcq.p.y": "from .z import k\nfrom .x import f", "hcq.p.z": "import os"}


@pytest.mark.parametrize("sources", CYCLE_PLANTS)
def test_plant_import_cycle_is_caught(sources):
  assert import_cycles(_plant_graph(sources)), f"not caught: {sources}"


def test_plant_import_cycle_clean_graph_passes():
  graph = _plant_graph(CYCLE_CLEAN)
  assert graph["hcq.p"] == {"hcq.p.x": 1, "hcq.p.y": 3} and import_cycles(graph) == []


# ---- test files are named after what they test, not after the review or round that asked for them

REVIEW_NAMES = re.compile(r"review|audit|follow_?up|fixes|round_?\d|issue_?\d", re.IGNORECASE)


def test_test_files_are_named_after_what_they_test():
  tests = sorted((ROOT / "tests").rglob("test_*.py"))
  assert len(tests) > 100
  bad = [str(p.relative_to(ROOT)) for p in tests if REVIEW_NAMES.search(p.stem)]
  assert not bad, "test files named after a review or a round, not what they test:\n" + "\n".join(bad)
