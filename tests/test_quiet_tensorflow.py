"""No TensorFlow C++ line on stderr, whatever TF_CPP_MIN_LOG_LEVEL the user set.

TF 2.21 prints absl's pre-initialization notice, the oneDNN line and "Could not
find cuda drivers" at import under every setting, 3 included (the usual way to
silence TensorFlow). Each command here imports TensorFlow, then stops at bad
input (cheap); its stderr must hold the project's own line and nothing else.
"""

import gzip
import json
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
    pairs = root / "pairs.tsv"
    pairs.write_bytes(b"".join(b"%d un\t%d one\n" % (i, i) for i in range(40)))
    tpu = ["--strategy", "tpu", "--tpu", "local"]
    return {
        # The strategy (and so the devices) is set up before the data is read.
        "train": ["train", "--data", cut, "--out", root / "run", "--train-steps", "1"],
        # A TPU asked for where there is none (TensorFlow's resolver finds none).
        "train-tpu": ["train", "--data", pairs, "--out", root / "tpu-run", *tpu],
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
    *(
        (command, "0")
        for command in ("build-vocab", "evaluate", "translate", "export", "train-tpu")
    ),
]

# One fresh process per setting runs that setting's commands one after another,
# as the `keras-selfattn` console script does (its program name is what makes a
# process the command line); each command's fd 2 is captured on its own. The
# first command meets TensorFlow's import under the setting; before each later
# one the user's setting is put back in the environment, so a command that did
# not force the level itself would pass the user's level to what it starts.
# check-serving goes first: it starts processes, and its import is the one
# every command shares.
SEQUENCE = [
    "check-serving",
    "train",
    "build-vocab",
    "evaluate",
    "translate",
    "export",
    "train-tpu",
]
DRIVER = r"""
import json, os, sys, tempfile
def _exit_returns(status):  # the command's os._exit: the next command runs on
    raise SystemExit(status)
os._exit = _exit_returns
argvs, setting, out = json.loads(sys.argv[1])
results = {}
for name, argv in argvs:
    if setting is None:
        os.environ.pop("TF_CPP_MIN_LOG_LEVEL", None)
    else:
        os.environ["TF_CPP_MIN_LOG_LEVEL"] = setting
    sys.argv = ["keras-selfattn", *argv]
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as err:
        os.dup2(err.fileno(), 2)
        try:
            import keras_selfattn_command  # the console script's module
            status = keras_selfattn_command.main()
        except SystemExit as exited:
            status = exited.code
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
        err.seek(0)
        results[name] = [status, err.read().decode("utf-8", "replace")]
with open(out, "w") as handle:
    json.dump(results, handle)
"""


@pytest.fixture(scope="module")
def stderr_by_setting(tmp_path_factory):
    """setting -> command -> (exit status, stderr), a process per setting, run
    when a test first asks for that setting."""
    runs = {}

    def get(setting):
        if setting not in runs:
            root = tmp_path_factory.mktemp(f"quiet-{setting}")
            commands = _commands(root)
            names = [n for n in SEQUENCE if (n, setting) in CASES]
            argvs = [(n, [str(a) for a in commands[n]]) for n in names]
            out = root / "results.json"
            env = dict(os.environ, PYTHONPATH=str(REPO))
            env.pop("TF_CPP_MIN_LOG_LEVEL", None)
            value = None if setting == "unset" else setting
            if value is not None:
                env["TF_CPP_MIN_LOG_LEVEL"] = value
            done = subprocess.run(
                [sys.executable, "-c", DRIVER, json.dumps([argvs, value, str(out)])],
                capture_output=True,
                text=True,
                env=env,
                timeout=300,
                check=False,
            )
            assert done.returncode == 0, done.stderr[-3000:]
            runs[setting] = json.loads(out.read_text())
        return runs[setting]

    return get


@pytest.mark.parametrize("command, setting", CASES)
def test_stderr_holds_only_our_own_lines(command, setting, stderr_by_setting):
    status, stderr = stderr_by_setting(setting)[command]
    assert status == 2, stderr[-3000:]
    assert not TF_LOG_LINE.search(stderr), stderr[-3000:]
    lines = stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("keras-selfattn: error: "), lines


def test_a_tpu_asked_for_where_there_is_none_is_named(stderr_by_setting):
    """``train --strategy tpu --tpu local`` without a TPU: the one line says so."""
    status, stderr = stderr_by_setting("0")["train-tpu"]
    assert status == 2, stderr[-3000:]
    assert (
        "keras-selfattn: error: strategy='tpu' but no TPU was found at 'local'"
        in stderr
    )
    assert "Traceback" not in stderr


# (--verbose bringing the lines back: tests/test_cli.py.)
