#!/usr/bin/env bash
# Proves one end of the dependency ranges that setup.py declares:
#   scripts/check_versions.sh oldest   the floors, pinned in constraints-oldest.txt
#   scripts/check_versions.sh newest   the newest releases setup.py's ranges allow
# Creates a clean virtual environment (default: under /tmp, removed at the end;
# VENV=DIR keeps it there), installs this checkout with the serving extra (not
# editable: what a user gets), checks that pip sees no conflict, prints the
# versions it got, imports the installed package from outside the checkout, and
# runs the layer, model, export, short training and distributed-piece tests of
# this checkout against those versions (extra pytest arguments are passed on).
# Needs PyPI, Python 3.11 and about 2.5 GB of disk.
set -euo pipefail
cd "$(dirname "$0")/.."

end=${1:-}
case "$end" in
  oldest) constraints=(-c constraints-oldest.txt) ;;
  newest) constraints=(--upgrade --upgrade-strategy eager) ;;
  *)
    echo "usage: scripts/check_versions.sh oldest|newest" >&2
    exit 2
    ;;
esac
shift

PYTHON=${PYTHON:-python3.11}
if [ -n "${VENV:-}" ]; then
  venv=$VENV
else
  scratch=$(mktemp -d "/tmp/keras-selfattn-$end.XXXXXX")
  venv=$scratch/venv
  trap 'rm -rf "$scratch"' EXIT
fi

"$PYTHON" -m venv "$venv"
py=$venv/bin/python
"$py" -m pip install --quiet --upgrade pip
# The test tools are not what is being checked: their newest releases.
"$py" -m pip install --quiet "${constraints[@]}" ".[serving]" pytest pytest-xdist hypothesis
"$py" -m pip check

echo "== $end: $("$py" --version)"
"$py" -m pip list --format=freeze 2>/dev/null |
  grep -iE '^(tensorflow|tensorflow-text|tensorflow-serving-api|keras|numpy|sacrebleu|babel|packaging|protobuf|ml.dtypes|h5py)=='

# The installed package (not this checkout) has its data and reports its versions.
(cd /tmp && TF_CPP_MIN_LOG_LEVEL=2 "$py" -c '
import keras, tensorflow as tf, tensorflow_text as tf_text
import keras_selfattn, keras_selfattn.text as text
from keras_selfattn.text import dates
assert len(text.load_bundled_dates()) > 1000
assert len(dates.generate_date_pairs(50, seed=0)) == 50  # babel formats every locale
print("installed", keras_selfattn.__file__, "tf", tf.__version__, "tf-text", tf_text.__version__, "keras", keras.__version__)
')

TF_CPP_MIN_LOG_LEVEL=2 "$py" -m pytest -q -p no:cacheprovider -n "${WORKERS:-2}" \
  tests/layers \
  tests/models/test_seq2seq.py \
  tests/serving/test_export.py \
  tests/training/test_train.py \
  tests/training/test_keras_fix.py \
  tests/training/test_distributed.py \
  tests/training/test_tpu_audit.py \
  "$@"
echo "== $end: passed"
