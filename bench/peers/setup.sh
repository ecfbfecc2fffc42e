#!/bin/sh
# Makes the virtual environment of the PyTorch peer (issue 25): PyTorch 2.x
# from PyPI, as a new user installs it, beside Debian's python3-torch. Not part
# of the library's build, its dependencies or the tests; only bench/run.sh and
# bench/peers/compare.sh use it (PEER_PYTHON, default VENV/bin/python).
#
#   bench/peers/setup.sh [VENV]        (default build/peers-venv)
#
# Idempotent: a VENV that already holds the pinned torch is reused as it is.
# Needs python3 with venv and pip, and PyPI (about 5.5 GB once installed).
# PyPI's Linux wheel is the CUDA build: it cannot run without its nvidia-*
# packages (libtorch.so links libtorch_cuda.so, which links cuFile,
# cuSPARSELt, NVSHMEM, ...: `pip install --no-deps torch` fails to import
# with "libcufile.so.0: cannot open shared object file"), and the CPU-only
# index (download.pytorch.org/whl/cpu) is a separate host that not every
# network reaches. So this installs the plain `pip install torch==PIN`, with
# every dependency; on the CPU it runs MKL and oneDNN (printed below).
set -eu
pin=2.15.0
venv=${1:-build/peers-venv}
py=${PEER_BASE_PYTHON:-/usr/bin/python3}
[ -x "$py" ] || py=$(command -v python3) || { echo "setup.sh: no python3 found" >&2; exit 1; }

have() { [ -x "$venv/bin/python" ] && "$venv/bin/python" - "$pin" <<'PY' 2>/dev/null
import sys, torch, numpy  # noqa: F401
sys.exit(0 if torch.__version__.split("+")[0] == sys.argv[1] else 1)
PY
}

if have; then
  echo "setup.sh: $venv already has torch $pin; reusing it"
else
  if [ ! -x "$venv/bin/python" ]; then
    "$py" -m venv "$venv" || {
      echo "setup.sh: '$py -m venv $venv' failed (Debian: apt-get install python3-venv)" >&2
      exit 1
    }
  fi
  "$venv/bin/python" -m pip --version > /dev/null 2>&1 || {
    echo "setup.sh: $venv has no pip (Debian: apt-get install python3-venv python3-pip)" >&2
    exit 1
  }
  echo "setup.sh: installing torch==$pin and numpy from PyPI into $venv (about 3 GB to download)"
  "$venv/bin/python" -m pip install --disable-pip-version-check "torch==$pin" numpy || {
    echo "setup.sh: pip install torch==$pin numpy failed: is PyPI reachable (pip config list," >&2
    echo "  PIP_INDEX_URL, a proxy), is there disk space (df -h $venv)?" >&2
    exit 1
  }
  have || { echo "setup.sh: $venv/bin/python cannot import torch $pin after the install" >&2; exit 1; }
fi

"$venv/bin/python" - <<'PY'
import sys, torch
print(f"python {sys.executable} ({sys.version.split()[0]})")
print(f"torch {torch.__version__}, CPU capability {torch.backends.cpu.get_cpu_capability()}, "
      f"mkldnn {torch.backends.mkldnn.is_available()}, mkl {torch.backends.mkl.is_available()}")
print(torch.__config__.show())
print(torch.__config__.parallel_info())
PY
echo "setup.sh: done; the peers use it by default, or PEER_PYTHON=$venv/bin/python"
