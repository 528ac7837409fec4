"""train's exit status after a failed health check: 3 once the run was long
enough for a working model to be expected, a warning and 0 before that."""

import pathlib
import types

import pytest

from keras_selfattn.cli import errors
from keras_selfattn.training import TrainConfig

FAILED = {"ok": False, "problems": ["the same sentence for every input"]}


def _result(steps, health=FAILED, **train):
    return types.SimpleNamespace(
        summary={"steps": steps, "health": health},
        train_config=TrainConfig(**train),
        run_dir=pathlib.Path("runs/x"),
    )


@pytest.mark.parametrize(
    "steps, train, status",
    [
        (20, {}, 0),  # a first trial of a few steps
        (420, {}, 0),  # about one epoch of the dates corpus at the defaults
        (999, {}, 0),
        (1000, {}, errors.EXIT_NOT_TRANSLATING),
        (5000, {"warmup_steps": 4000}, errors.EXIT_NOT_TRANSLATING),
        (4000, {"warmup_steps": 4000}, 0),  # still in its warm-up
        (1999, {"accumulate_steps": 2}, 0),  # 999 updates
        (2000, {"accumulate_steps": 2}, errors.EXIT_NOT_TRANSLATING),
    ],
)
def test_a_failed_check_fails_the_run_once_it_was_long_enough(
    steps, train, status, capsys
):
    assert errors.health_status(_result(steps, **train)) == status
    (line,) = capsys.readouterr().err.splitlines()
    assert "the same sentence for every input" in line and "runs/x" in line
    if status:
        assert line.startswith("keras-selfattn: error: at the last validation")
    else:
        assert line.startswith("keras-selfattn: warning: at the last validation")
        assert f"{steps} steps" in line and "--epochs or --train-steps" in line


@pytest.mark.parametrize("health", [None, {"ok": True, "problems": []}])
def test_a_run_that_translates_or_was_not_checked_ends_well(health, capsys):
    assert errors.health_status(_result(20, health)) == 0
    assert errors.health_status(_result(5000, health)) == 0
    assert capsys.readouterr().err == ""
