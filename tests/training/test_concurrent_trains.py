"""Two `train` processes on one run directory at once: the second exits 2 naming it.

Kept apart from test_run_lock.py (and free of its imports) so that it runs, and
fails, on a tree without the lock too.
"""

import os
import pathlib
import socket
import subprocess
import sys
import time

import pytest

from keras_selfattn import text
from tests.bad_input_cases import TINY_RUN_ARGS, run_in_process

REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_two_trains_at_once_on_one_directory(tmp_path):
    """The second `train` exits 2 naming the first; the first finishes untouched."""
    data = text.write_pairs(tmp_path / "pairs.tsv", text.load_bundled_dates()[:300])
    argv = ["train", "--data", str(data), "--out", str(tmp_path / "run")]
    argv += ["--epochs", "1", *TINY_RUN_ARGS]
    first = subprocess.Popen(
        [sys.executable, "-m", "keras_selfattn", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
    )
    # The first has taken the lock (or, without one, started writing the run).
    lock_file = tmp_path / "run" / "train.lock"
    started = tmp_path / "run" / "config.json"
    deadline = time.monotonic() + 300
    while (
        not (lock_file.exists() and lock_file.stat().st_size) and not started.exists()
    ):
        assert first.poll() is None, first.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.05)
    second = run_in_process(argv)
    _, err = first.communicate(timeout=600)
    assert first.returncode == 0, err[-3000:]
    assert second.status == 2, second
    assert second.stderr.count("\n") == 1, second.stderr
    assert f"run is in use by another train (host {socket.gethostname()}, " in (
        second.stderr
    )
    assert f"process {first.pid}, since " in second.stderr
    assert (tmp_path / "run" / "training.json").exists()
    assert not lock_file.exists()  # released at the end
