#!/usr/bin/env bash
# Set up what the tests need (Debian toolchain used as the reference: gcc, clang-19/lld-19/llvm-19, tshark, lspci;
# the test extras in .venv; xz-utils unpacks the kernel source the generator fetches with apt-get download) and run
# the whole test suite. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
APT_PACKAGES="python3 python3-venv git xz-utils gcc g++ clang-19 lld-19 llvm-19 tshark pciutils rocm-device-libs python3-scapy"
missing=""
for p in $APT_PACKAGES; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
if [ -n "$missing" ]; then
  if [ "$(id -u)" = 0 ]; then SUDO=""; elif command -v sudo >/dev/null; then SUDO="sudo"; else SUDO="none"; fi
  if [ "$SUDO" = none ]; then
    echo "warning: cannot install$missing (not root, no sudo): tests that need them will be skipped" >&2
  else
    $SUDO apt-get update -q >/dev/null
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -q $missing >/dev/null
  fi
fi
bash scripts/install.sh
# the packages the tests read (Debian sources, firmware, ptxas) are fetched while pip installs the test extras, not
# inside the first tests that need them (scripts/fetch_sources.py; what it cannot fetch, the tests fetch or skip)
.venv/bin/python scripts/fetch_sources.py > .venv/fetch_sources.log 2>&1 &
fetch=$!
.venv/bin/python -m pip install -q -e '.[test]'
wait "$fetch" || true
grep -h "^fetch_sources" .venv/fetch_sources.log >&2 || true
# the tests run in one pytest worker process per CPU this job may use (pytest-xdist; 2 on CI's 2 cores): the CPUs it
# may run on (nproc: the affinity mask), fewer under a cgroup v2 CPU quota (cpu.max, as containers set it), at most 8
# (each worker collects the whole suite and holds its own ~300 MB). Each test still runs whole in one process, and
# the flock-guarded caches above are shared safely. `-n 0` (an extra argument, which comes later and wins) runs them
# all in this one process.
workers=$(nproc)
if [ -r /sys/fs/cgroup/cpu.max ]; then
  read -r quota period < /sys/fs/cgroup/cpu.max || true
  if [ "${quota:-max}" != max ] && [ "${period:-0}" -gt 0 ]; then
    allowed=$(( (quota + period - 1) / period ))
    [ "$allowed" -lt "$workers" ] && workers=$allowed
  fi
fi
[ "$workers" -gt 8 ] && workers=8
[ "$workers" -lt 1 ] && workers=1
set +e
.venv/bin/python -m pytest tests -n "$workers" "$@"
rc=$?
set -e
# pytest exits 5 when it collected no test: that is not a failure of the suite
[ "$rc" = 5 ] && { echo "no tests collected"; rc=0; }
exit "$rc"
