#!/usr/bin/env bash
# The two quick-start commands:
#   ./run.sh demo [ARGS...]   the main job on the bundled data (writes ./runs/demo)
#   ./run.sh test [ARGS...]   the whole test suite (slow tests included)
#   ./run.sh lint             ruff format --check and ruff check over the tree
# Each creates ./.venv with Python 3.11 on first use and installs the package into it
# with the exact versions of constraints.txt: demo only the extras the demo needs
# (plots, serving), test and lint the test tools too (JAX, ruff, hypothesis...).
# One environment for both: a stamp per extras set, so that test after demo
# installs only the difference.
set -euo pipefail
cd "$(dirname "$0")"

PYTHON=${PYTHON:-python3.11}
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
VENV=.venv
DEMO_EXTRAS=plots,serving
TEST_EXTRAS=test,plots,serving

# ensure_env EXTRAS: ./.venv holds the package with those extras.
ensure_env() {
  local extras=$1
  local stamp=$VENV/.installed-${extras//,/-}
  if [ ! -x "$VENV/bin/python" ]; then
    "$PYTHON" -m venv "$VENV"
  fi
  # Reinstall when setup.py or constraints.txt changed since the last install.
  # constraints.txt holds the exact versions of the reproducible path; setup.py
  # only the ranges a user's own environment may take.
  if [ ! -f "$stamp" ] || [ setup.py -nt "$stamp" ] || [ constraints.txt -nt "$stamp" ]; then
    "$VENV/bin/python" -m pip install --quiet --upgrade pip
    "$VENV/bin/python" -m pip install --quiet -c constraints.txt -e ".[$extras]"
    touch "$stamp"
  fi
}

cmd=${1:-}
shift || true
export TF_CPP_MIN_LOG_LEVEL=${TF_CPP_MIN_LOG_LEVEL:-2}
case "$cmd" in
  demo)
    ensure_env "$DEMO_EXTRAS"
    exec "$VENV/bin/keras-selfattn" demo "$@"
    ;;
  lint)
    ensure_env "$TEST_EXTRAS"
    "$VENV/bin/ruff" format --check .
    exec "$VENV/bin/ruff" check .
    ;;
  test)
    ensure_env "$TEST_EXTRAS"
    exec "$VENV/bin/python" -m pytest -n 2 "$@"
    ;;
  *)
    echo "usage: ./run.sh {demo|test|lint} [ARGS...]" >&2
    exit 2
    ;;
esac
