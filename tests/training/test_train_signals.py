"""``keras-selfattn train`` stopped by real signals at its phases, then the same
command: SIGTERM at start-up leaves nothing, Ctrl-C before the first backup makes
the rerun start over, SIGTERM mid-training resumes from the last backup, Ctrl-C
once the steps are done (while the final work is written) is finished by the
rerun, and a Ctrl-C as that finishing command ends gives its own line and
status.

One run of one command line, stopped five times: this is also where
tests/bad_input_cases.py's operator cases "train interrupted (Ctrl-C) before its
first backup, then the same command" and "train SIGTERMed mid-training, then the
same command" are asserted (their ``Case.checked_in``): each would cost a
process and a whole tiny run, and this run passes through both."""

import csv
import json
import os
import signal

import pytest

from keras_selfattn import text
from tests import forked_commands
from tests.bad_input_cases import (
    TINY_RUN_WITH_FIGURES,
    signalled_at,
)
from tests.training.cluster import REPO

pytestmark = pytest.mark.slow


def _history_steps(run):
    with open(run / "history.csv", newline="", encoding="utf-8") as handle:
        return [row[0] for row in csv.reader(handle)]


def _last_line(result):
    return result.stderr.strip().splitlines()[-1]


# The console script, its command's `main` followed by a Ctrl-C of its own: the
# signal in the last instant of a command that is done.
_CTRL_C_AS_IT_ENDS = """
import os, signal, sys
import keras_selfattn_command
from keras_selfattn.cli import commands

done = commands.main

def main(argv=None, *, args=None):
    status = done(argv, args=args)
    os.kill(os.getpid(), signal.SIGINT)
    return status

commands.main = main
sys.argv = ["keras-selfattn", *sys.argv[1:]]
sys.exit(keras_selfattn_command.main())
"""


def test_sigterm_mid_training_then_ctrl_c_in_the_final_work_then_finished(tmp_path):
    """Then the command that finishes the run is the console script with a Ctrl-C
    of its own once the run is marked finished, as the process ends: the
    command's own line and 130, not a death by the signal with no line."""
    data = text.write_pairs(tmp_path / "pairs.tsv", text.load_bundled_dates()[:300])
    run = tmp_path / "run"
    # With its figures: the finished run's plots are looked at. A backup every 8
    # steps: a Ctrl-C at step 1 and a SIGTERM at step 9 each land 7 steps ahead of
    # the next backup or the run's end.
    argv = ["train", "--data", str(data), "--out", str(run), *TINY_RUN_WITH_FIGURES]
    argv += ["--train-steps", "16", "--eval-every", "4", "--save-every", "8"]
    argv += ["--log-every", "1"]

    # Start-up (the data read, the model not built yet): nothing saved, nothing left.
    early = signalled_at(argv, "data: 1 file(s)", signal.SIGTERM)
    assert early.status == 143, early
    assert _last_line(early) == (
        "keras-selfattn: interrupted by SIGTERM; nothing saved yet: the rerun starts "
        "from step 0"
    ), early.stderr
    assert not run.exists()

    # Ctrl-C at the first step, before any backup: nothing saved yet.
    interrupted = signalled_at(argv, "step 1/16", signal.SIGINT)
    assert interrupted.status == 130, interrupted
    assert _last_line(interrupted) == (
        "keras-selfattn: interrupted; nothing saved yet: the rerun starts from step 0"
    ), interrupted.stderr
    assert not (run / "training.json").exists()

    # The same command starts over (nothing to resume from), and past the first
    # backup (step 8) a SIGTERM, as a supervisor stops.
    stopped = signalled_at(argv, "step 9/16", signal.SIGTERM)
    assert "resuming from step" not in stopped.stdout, stopped.stdout
    assert "step 1/16" in stopped.stdout, stopped.stdout
    assert stopped.status == 143, stopped
    assert _last_line(stopped) == (
        "keras-selfattn: interrupted by SIGTERM; rerun the same command to resume "
        "from step 8"
    ), stopped.stderr
    assert "Traceback" not in stopped.stderr + interrupted.stderr
    assert not (run / "training.json").exists()

    # Resumed; Ctrl-C once the steps are done, while the final work is written.
    resumed = signalled_at(argv, "dropped for length", signal.SIGINT)
    assert "resuming from step 8\n" in resumed.stdout, resumed.stdout
    assert "step 1/16" not in resumed.stdout
    assert resumed.status == 130, resumed
    assert _last_line(resumed) == (
        "keras-selfattn: interrupted; its 16 steps are done: rerun the same command "
        "to finish the run (its last validation, test metrics and any figures)"
    ), resumed.stderr
    assert not (run / "training.json").exists()
    assert not (run / "metrics.json").exists()

    # The same command finishes the run: nothing trained again. Then, as the
    # process ends, a Ctrl-C.
    finished = forked_commands.run(
        ["-c", _CTRL_C_AS_IT_ENDS, *argv],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        timeout=600,
        check=False,
    )
    assert finished.returncode == 130, (finished.returncode, finished.stderr[-3000:])
    assert _last_line(finished) == (
        f"keras-selfattn: interrupted as it ended; the run in {run} is finished "
        "and complete"
    )
    assert finished.stdout.splitlines()[-1] == f"run directory: {run}"
    assert "resuming from step 16 (its steps are done: finishing the run)" in (
        finished.stdout
    )
    assert "step 1/16" not in finished.stdout
    assert json.loads((run / "training.json").read_text())["steps"] == 16
    assert "test" in json.loads((run / "metrics.json").read_text())
    assert (run / "plots" / "history.png").exists()
    assert _history_steps(run) == ["step", "4", "8", "12", "16"]
    assert not (run / "train.lock").exists()
