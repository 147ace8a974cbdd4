"""Generate the modules the manifest lists: resolve their headers in the unpacked packages, parse, write."""
from __future__ import annotations

import json
import os
import re

from . import sources

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
MANIFEST = os.path.join(PACKAGE_DIR, "manifest.json")


class GenerateError(Exception):
  pass


def load_manifest(path: str = MANIFEST) -> dict:
  with open(path) as f: return json.load(f)


def module_path(name: str) -> str:
  return os.path.join(*name.split(".")) + ".py"


class Roots:
  """Where each package's members were unpacked; resolves "pkg:relative/path" references."""

  def __init__(self, manifest: dict, cache: str, log, git_dirs: str = ""):
    self.manifest, self.cache, self.log, self.git_dirs = manifest, cache, log, git_dirs
    self.dirs: dict[str, str] = {}

  def root(self, key: str) -> str:
    if key not in self.dirs:
      if key == "shim":
        self.dirs[key] = os.path.join(self.cache, "shim")
        sources.asm_generic_shim(self.root("linux"), self.cache)
      else:
        pkg = self.manifest["packages"].get(key)
        if pkg is None: raise GenerateError(f"manifest: unknown package key {key!r}")
        self.dirs[key] = sources.unpack(pkg, self.cache, self.log, self.git_dirs)
    return self.dirs[key]

  def path(self, ref: str) -> str:
    if os.path.isabs(ref):   # a local file (tests, experiments); the shipped manifest names package members only
      if not os.path.exists(ref): raise GenerateError(f"{ref}: not found")
      return ref
    key, _, rel = ref.partition(":")
    p = os.path.join(self.root(key), rel)
    if not os.path.exists(p): raise GenerateError(f"{ref}: not found in the unpacked package ({p})")
    return p

  def labels(self) -> dict[str, str]:
    out = {}
    for k, d in self.dirs.items():
      if k == "shim": out[d] = "shim"
      else:
        out[d] = package_label(self.manifest["packages"][k])
    return out


def package_label(pkg: dict) -> str:
  if pkg.get("git"): return f"{pkg['git']} {pkg['tag']}"
  return f"{pkg['name']} {pkg['version']}"


def module_packages(spec: dict) -> set:
  """The manifest package keys a module's headers and include folders come from."""
  refs = list(spec.get("headers", [])) + list(spec.get("include", []))
  refs += [spec[k] for k in ("offset", "sh_mask", "xml", "root") if spec.get(k)]
  return {r.partition(":")[0] for r in refs if not os.path.isabs(r) and ":" in r}


def describe(spec: dict, manifest: dict, roots: "Roots | None" = None) -> str:
  refs = spec.get("headers") or ([spec["root"] + "/" + spec["xml"] if spec.get("root") else spec["xml"]] if spec.get("xml")
                                 else [spec["path"]] if spec.get("path") else [spec["offset"], spec["sh_mask"]])
  out = []
  for r in refs:
    if os.path.isabs(r): out.append(os.path.basename(r)); continue
    key, _, rel = r.partition(":")
    pkg = manifest["packages"][key]
    if pkg.get("git"):
      # the tag, the commit it was pinned at and the header's git blob id (the text it was generated from)
      blob = f"@{sources.git_blob_sha(roots.path(r))[:12]}" if roots is not None else ""
      out.append(f"{pkg['git']} {pkg['tag']} (commit {pkg['commit'][:12]}):{rel}{blob}")
    else: out.append(f"{pkg['name']} {pkg['version']}:{rel}")
  return ", ".join(out)


def generate_one(name: str, manifest: dict, roots: Roots) -> str:
  from . import codegen
  from .clangparse import HeaderError, Parser
  spec = manifest["modules"][name]
  try:
    if spec["kind"] == "isaspec":
      from . import isaspec
      try: return isaspec.module_text(name, roots.path(spec["xml"]), describe(spec, manifest))
      except isaspec.IsaSpecError as e: raise GenerateError(f"module {name}: {e}") from None
    if spec["kind"] == "fddevices":
      from . import fddevices
      try: return fddevices.generate(name, roots.path(spec["path"]), describe(spec, manifest))
      except fddevices.DevicesError as e: raise GenerateError(f"module {name}: {e}") from None
    if spec["kind"] == "rnndb":
      from . import rnndb
      try: return rnndb.generate(name, roots.path(spec["root"]), spec["xml"], describe(spec, manifest))
      except rnndb.RnnError as e: raise GenerateError(f"module {name}: {e}") from None
    if spec["kind"] == "regs":
      return codegen.regs_module(name, roots.path(spec["offset"]), roots.path(spec["sh_mask"]), spec["filter"],
                                 describe(spec, manifest))
    headers = [roots.path(h) for h in spec["headers"]]
    incs = [roots.path(i) for i in spec.get("include", [])]
    parser = Parser(headers, incs, prelude=spec.get("prelude", ""), lang=spec.get("lang", "c"),
                    defines=spec.get("defines"))
    parser.exclude_records = set(spec.get("exclude_records", []))
    filt = re.compile(spec["macro_filter"]).match if spec.get("macro_filter") else None
    info = parser.run(filt)
    return codegen.c_module_checked(name, info, describe(spec, manifest, roots), roots.labels())
  except HeaderError as e:
    raise GenerateError(f"module {name}: {e}") from None


def generate(names: list[str], manifest: dict, cache: str, out_dir: str, log=print, git_dirs: str = "") -> list[str]:
  """Write the modules; returns the names of those skipped because their sources are not on this machine (git
  packages neither unpacked in the cache nor in a mirror of git_dirs: sources.SourceUnavailable), each logged."""
  roots = Roots(manifest, cache, log, git_dirs)
  for n in names:
    if n not in manifest["modules"]: raise GenerateError(f"unknown module {n}; known: {', '.join(manifest['modules'])}")
  skipped = []
  for n in names:
    try: text = generate_one(n, manifest, roots)
    except sources.SourceUnavailable as e:
      log(f"autogen: {n}: skipped, its headers are not on this machine ({e}); the committed module is left as it is")
      skipped.append(n)
      continue
    path = os.path.join(out_dir, module_path(n))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    init = os.path.join(os.path.dirname(path), "__init__.py")
    if os.path.dirname(path) != os.path.abspath(out_dir) and not os.path.exists(init):
      with open(init, "w") as f: f.write('"""Generated AMD modules (python -m hcq.autogen)."""\n')
    if len(text) > 5 * 1024 * 1024: raise GenerateError(f"module {n} is {len(text)} bytes, over the 5 MB limit")
    with open(path, "w") as f: f.write(text)
    log(f"autogen: {n}: {len(text)} bytes")
  return skipped
