"""Two `train` processes on one run directory at once: the second exits 2 naming it.

Kept apart from test_run_lock.py (and free of its imports) so that it runs, and
fails, on a tree without the lock too.
"""

import socket

import pytest

from tests.training import reference_run


@pytest.mark.slow
def test_two_trains_at_once_on_one_directory(tmp_path_factory):
    """The second `train` exits 2 naming the first; the first finishes untouched.

    The first is the shared tiny run without figures (`reference_run.
    no_figures_run`, a fresh process); the second, the same command in this
    process, started once the first holds the run directory."""
    shared = reference_run.no_figures_run(tmp_path_factory)
    run = shared.root / "run"
    status, _, stderr = shared.second
    assert shared.status == 0, shared.stderr[-3000:]
    assert status == 2, shared.second
    assert stderr.count("\n") == 1, stderr
    assert f"run is in use by another train (host {socket.gethostname()}, " in stderr
    assert f"process {shared.pid}, since " in stderr
    assert (run / "training.json").exists()
    assert not (run / "train.lock").exists()  # released at the end
