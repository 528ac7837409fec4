#!/usr/bin/env bash
# The two quick-start commands, and two for development:
#   ./run.sh demo [ARGS...]   the main job on the bundled data (writes ./runs/demo)
#   ./run.sh test [ARGS...]   the whole test suite (slow tests included)
#   ./run.sh lint             ruff format --check, ruff check, mypy (pyproject.toml's
#                             [tool.mypy]) and the strict documentation build
#   ./run.sh docs [ARGS...]   the documentation site, built strict into ./site
# Each creates ./.venv with Python 3.11 on first use and installs the package into it
# with the exact versions of constraints.txt: demo only the extras the demo needs
# (plots, serving), test the test tools too (JAX, ruff, mypy, hypothesis...), docs
# the docs extra (mkdocs, mkdocstrings), lint both. One environment for all: a stamp
# per extras set, and a set already installed serves any of its subsets, so that
# test after demo installs only the difference and test after lint nothing.
set -euo pipefail
cd "$(dirname "$0")"

PYTHON=${PYTHON:-python3.11}
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
VENV=.venv
DEMO_EXTRAS=plots,serving
TEST_EXTRAS=test,plots,serving
DOCS_EXTRAS=docs
# lint runs test's tools (ruff, mypy) and builds the docs: a superset of test's set,
# so that CI's lint then test installs once.
LINT_EXTRAS=$TEST_EXTRAS,docs

# installed EXTRAS: a stamp of an install that holds every extra of EXTRAS (a,b: the
# stamp .installed-b-a-c holds both) and is newer than setup.py and constraints.txt.
installed() {
  local stamp extra
  for stamp in "$VENV"/.installed-*; do
    [ -f "$stamp" ] && [ ! setup.py -nt "$stamp" ] && [ ! constraints.txt -nt "$stamp" ] ||
      continue
    for extra in ${1//,/ }; do
      case "${stamp##*/.installed}-" in
        *"-$extra-"*) ;;
        *) continue 2 ;;
      esac
    done
    return 0
  done
  return 1
}

# ensure_env EXTRAS: ./.venv holds the package with (at least) those extras.
ensure_env() {
  local extras=$1
  if [ ! -x "$VENV/bin/python" ]; then
    "$PYTHON" -m venv "$VENV"
  fi
  # Reinstall when setup.py or constraints.txt changed since the last install.
  # constraints.txt holds the exact versions of the reproducible path; setup.py
  # only the ranges a user's own environment may take.
  if ! installed "$extras"; then
    "$VENV/bin/python" -m pip install --quiet --upgrade pip
    "$VENV/bin/python" -m pip install --quiet -c constraints.txt -e ".[$extras]"
    touch "$VENV/.installed-${extras//,/-}"
  fi
}

# build_docs [MKDOCS_ARGS...]: mkdocs.yml's site, strict (a warning fails it).
build_docs() {
  NO_MKDOCS_2_WARNING=1 "$VENV/bin/python" -m mkdocs build --strict "$@"
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
    ensure_env "$LINT_EXTRAS"
    "$VENV/bin/ruff" format --check .
    "$VENV/bin/ruff" check .
    # the files of [tool.mypy], with no cache: nothing of an earlier run hides an error
    "$VENV/bin/python" -m mypy --cache-dir=/dev/null
    site=$(mktemp -d)
    trap 'rm -rf "$site"' EXIT
    build_docs --quiet --site-dir "$site"
    echo "lint: ruff format, ruff check, mypy and the strict docs build passed"
    ;;
  docs)
    ensure_env "$DOCS_EXTRAS"
    build_docs "$@"
    ;;
  test)
    ensure_env "$TEST_EXTRAS"
    exec "$VENV/bin/python" -m pytest -n 2 "$@"
    ;;
  *)
    echo "usage: ./run.sh {demo|test|lint|docs} [ARGS...]" >&2
    exit 2
    ;;
esac
