#!/usr/bin/env bash
# The two quick-start commands:
#   ./run.sh demo [ARGS...]   the main job on the bundled data (writes ./runs/demo)
#   ./run.sh test [ARGS...]   the whole test suite (slow tests included)
#   ./run.sh lint             ruff format --check and ruff check over the tree
# Each creates ./.venv with Python 3.11 on first use and installs the package into it
# with the exact versions of constraints.txt.
set -euo pipefail
cd "$(dirname "$0")"

PYTHON=${PYTHON:-python3.11}
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
VENV=.venv
STAMP=$VENV/.installed

ensure_env() {
  if [ ! -x "$VENV/bin/python" ]; then
    "$PYTHON" -m venv "$VENV"
  fi
  # Reinstall when setup.py or constraints.txt changed since the last install.
  # constraints.txt holds the exact versions of the reproducible path; setup.py
  # only the ranges a user's own environment may take.
  if [ ! -f "$STAMP" ] || [ setup.py -nt "$STAMP" ] || [ constraints.txt -nt "$STAMP" ]; then
    "$VENV/bin/python" -m pip install --quiet --upgrade pip
    "$VENV/bin/python" -m pip install --quiet -c constraints.txt -e ".[test,plots,serving]"
    touch "$STAMP"
  fi
}

cmd=${1:-}
shift || true
export TF_CPP_MIN_LOG_LEVEL=${TF_CPP_MIN_LOG_LEVEL:-2}
case "$cmd" in
  demo)
    ensure_env
    exec "$VENV/bin/keras-selfattn" demo "$@"
    ;;
  lint)
    ensure_env
    "$VENV/bin/ruff" format --check .
    exec "$VENV/bin/ruff" check .
    ;;
  test)
    ensure_env
    exec "$VENV/bin/python" -m pytest -n 2 "$@"
    ;;
  *)
    echo "usage: ./run.sh {demo|test|lint} [ARGS...]" >&2
    exit 2
    ;;
esac
