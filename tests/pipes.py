"""Running the hcq command as a child whose stdout reader goes away early (as `hcq ... | head -1` does)."""
import os
import subprocess
import sys
import threading


def first_line_then_close(argv, env=None, timeout_s: float = 120):
  """Run `hcq argv` with stdout into a pipe, read one line and close the pipe; (exit status, the line, stderr).
  Every step is bounded: a watchdog kills a child that hangs before its first line (readline then sees end of file),
  and communicate() waits at most timeout_s for the exit and the stderr text."""
  main_py = "import sys; from hcq.cli import main; sys.exit(main(sys.argv[1:]))"
  p = subprocess.Popen([sys.executable, "-c", main_py, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, env={**os.environ, **(env or {})})
  watchdog = threading.Timer(timeout_s, p.kill)
  watchdog.start()
  try:
    first = p.stdout.readline()
    p.stdout.close()
    _, err = p.communicate(timeout=timeout_s)
  finally:
    watchdog.cancel()
    if p.poll() is None:
      p.kill()
      p.wait()
  return p.returncode, first, err
