"""hcq.compiler imports its IR on first use (PEP 562): decoding and loading AMD code objects (hcq disasm, the mock's
emulator) does not import it, and the package's IR names still work (issue 33, cold start)."""
import subprocess
import sys


def test_decoding_and_loading_code_objects_do_not_import_the_ir():
  code = ("import sys, hcq.compiler.isa.amd.decode, hcq.compiler.isa.amd.codeobject\n"
          "print('hcq.compiler.ir' in sys.modules)\n"
          "from hcq.compiler import UOp, dtypes, Ops\n"
          "import hcq.compiler as c\n"
          "print('hcq.compiler.ir' in sys.modules, UOp.__module__, c.Ops is Ops)\n")
  out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
  assert out == ["False", "True", "hcq.compiler.ir.uop", "True"]


def test_an_unknown_name_is_an_attribute_error():
  import hcq.compiler as c
  try:
    c.NoSuchThing   # noqa: B018
  except AttributeError as e:
    assert "NoSuchThing" in str(e)
  else:
    raise AssertionError("hcq.compiler.NoSuchThing did not raise AttributeError")
