"""`hcq`'s argument parser is built once per process (cli/__init__.py _parser): main() called again reuses it, and
a reused parser parses each command line afresh (no value of an earlier one leaks into the next)."""
import hcq
from hcq.cli import main


def test_main_builds_its_parser_once_and_a_reused_parser_keeps_no_earlier_values(monkeypatch, capsys):
  builds, real = [], hcq.cli.build_parser
  monkeypatch.setattr(hcq.cli, "build_parser", lambda: builds.append(1) or real())
  hcq.cli._parser.cache_clear()
  try:
    for _ in range(3): assert main(["disasm", "--help"]) == 0
    assert len(builds) == 1
    parser = hcq.cli._parser()
    first = parser.parse_args(["disasm", "x.hsaco", "--kernel", "a", "--kernel", "b"])
    again = parser.parse_args(["disasm", "y.hsaco"])
    assert first.kernel == ["a", "b"] and again.kernel is None
  finally: hcq.cli._parser.cache_clear()      # the next main() builds one with the real build_parser
  capsys.readouterr()
