"""The design lives in the repository: every "DESIGN.md §N" a file cites is a section of docs/DESIGN.md, every
Markdown file a file names exists in the repository, and nothing points at notes outside it (a clone has only what
is committed)."""
import pathlib
import re
import subprocess

ROOT = pathlib.Path(__file__).resolve().parent.parent
SECTION = re.compile(r"DESIGN\.md §(\d+)")
MD_NAME = re.compile(r"(?<![\w/.-])((?:[\w-]+/)*[\w-]+\.md)\b")
OUTSIDE = re.compile(r"\.\./shared|/work/shared|shared/reference|reference notes")


def tracked_text_files():
  try:
    out = subprocess.run(["git", "-C", str(ROOT), "ls-files"], capture_output=True, text=True, check=True).stdout
    names = out.split()
  except (OSError, subprocess.CalledProcessError):     # an unpacked wheel or sdist: walk the tree
    names = [str(p.relative_to(ROOT)) for p in ROOT.rglob("*") if p.is_file() and ".venv" not in p.parts]
  for n in names:
    # this file's own planted examples are not citations
    if n.endswith((".py", ".md", ".sh", ".toml", ".txt")) and "fixtures" not in n and n != "tests/test_docs.py":
      yield ROOT / n


def design_sections():
  return {int(m) for m in re.findall(r"^## §(\d+)", (ROOT / "docs" / "DESIGN.md").read_text(), re.M)}


def missing_sections(text: str, sections: set[int]) -> list[int]:
  return [n for n in map(int, SECTION.findall(text)) if n not in sections]


def test_every_cited_design_section_exists():
  sections = design_sections()
  assert sections, "docs/DESIGN.md has no numbered sections"
  bad = [f"{p.relative_to(ROOT)}: §{n}" for p in tracked_text_files()
         for n in missing_sections(p.read_text(errors="replace"), sections)]
  assert not bad, "cited sections missing from docs/DESIGN.md:\n" + "\n".join(bad)


def test_no_file_points_outside_the_repository():
  bad = [f"{p.relative_to(ROOT)}:{i}: {line.strip()[:100]}" for p in tracked_text_files()
         for i, line in enumerate(p.read_text(errors="replace").splitlines(), 1)
         if OUTSIDE.search(line)]
  assert not bad, "citations of notes a clone does not contain:\n" + "\n".join(bad)


def test_every_named_markdown_file_exists():
  present = {p.name for p in ROOT.rglob("*.md") if ".venv" not in p.parts}
  paths = {str(p.relative_to(ROOT)) for p in ROOT.rglob("*.md") if ".venv" not in p.parts}
  bad = []
  for p in tracked_text_files():
    for i, line in enumerate(p.read_text(errors="replace").splitlines(), 1):
      for name in MD_NAME.findall(line):
        if "/" in name and name in paths: continue
        if "/" not in name and name in present: continue
        if "/" in name and any(q.endswith(name) for q in paths): continue
        bad.append(f"{p.relative_to(ROOT)}:{i}: {name}")
  assert not bad, "Markdown files named but not in the repository:\n" + "\n".join(bad)


def test_the_rules_see_what_they_must():
  sections = design_sections()
  assert missing_sections("as DESIGN.md §4 says; and DESIGN.md §42", sections) == [42]
  assert OUTSIDE.search("see ../shared/reference/x.md") and not OUTSIDE.search("docs/DESIGN.md §2")
  assert MD_NAME.findall("docs/DESIGN.md and nowhere/else.md") == ["docs/DESIGN.md", "nowhere/else.md"]
