"""No TensorFlow C++ line on stderr, whatever TF_CPP_MIN_LOG_LEVEL the user set.

TF 2.21 prints absl's pre-initialization notice, the oneDNN line and "Could not
find cuda drivers" at import under every setting, 3 included (the usual way to
silence TensorFlow). Each command here imports TensorFlow, then stops at bad
input (cheap); its stderr must hold the project's own line and nothing else.
"""

import gzip
import os
import pathlib
import subprocess
import sys

import pytest

from tests.test_cli import TF_LOG_LINE

pytestmark = pytest.mark.slow
REPO = pathlib.Path(__file__).resolve().parents[1]
SETTINGS = ["unset", "0", "1", "2", "3"]


def _commands(root):
    """Command -> argv; each loads TensorFlow before it fails on its input."""
    cut = root / "cut.tsv.gz"
    data = gzip.compress(b"".join(b"%d un\t%d one\n" % (i, i) for i in range(500)))
    cut.write_bytes(data[: len(data) // 2])
    empty = root / "empty-run"
    empty.mkdir()
    export = root / "export" / "1"
    export.mkdir(parents=True)
    (export / "saved_model.pb").write_bytes(b"garbage")
    return {
        # The strategy (and so the devices) is set up before the data is read.
        "train": ["train", "--data", cut, "--out", root / "run", "--train-steps", "1"],
        "build-vocab": ["build-vocab", "--data", cut, "--out", root / "vocab"],
        "evaluate": ["evaluate", "--model", empty],
        "translate": ["translate", "--model", empty, "x"],
        "export": ["export", "--model", empty, "--export-dir", root / "base"],
        "check-serving": ["check-serving", export],
    }


# The filter is one step of `main`, before any command, and it forces the level to
# 3 whatever the user set; what differs between commands is what TensorFlow logs
# after the import. So every command under the loudest setting (0), and every
# setting for `train` (the in-process import) and for `check-serving` (the
# processes it starts inherit the level).
CASES = [
    *(
        (command, setting)
        for command in ("train", "check-serving")
        for setting in SETTINGS
    ),
    *((command, "0") for command in ("build-vocab", "evaluate", "translate", "export")),
]


@pytest.mark.parametrize("command, setting", CASES)
def test_stderr_holds_only_our_own_lines(command, setting, tmp_path):
    argv = _commands(tmp_path)[command]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("TF_CPP_MIN_LOG_LEVEL", None)
    if setting != "unset":
        env["TF_CPP_MIN_LOG_LEVEL"] = setting
    done = subprocess.run(
        [sys.executable, "-m", "keras_selfattn", *map(str, argv)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert done.returncode == 2, done.stderr[-3000:]
    assert not TF_LOG_LINE.search(done.stderr), done.stderr[-3000:]
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("keras-selfattn: error: "), lines


# (--verbose bringing the lines back: tests/test_cli.py.)
