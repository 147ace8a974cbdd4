import pathlib
import sys

# the fake sysfs builder is shared with tests/system
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "system"))
