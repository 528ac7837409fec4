"""The help says what the code does: options read against their fields' behaviour."""

import argparse

import pytest

from keras_selfattn.choices import LR_SCHEDULES
from keras_selfattn.cli.commands import build_parser
from keras_selfattn.training import TrainConfig


def _help(command, flag):
    parser = build_parser()
    subparsers = next(
        a for a in parser._actions if isinstance(a, argparse._SubParsersAction)
    )
    command_parser = subparsers.choices[command]
    (action,) = [a for a in command_parser._actions if flag in a.option_strings]
    return " ".join(action.help.split())


@pytest.mark.parametrize("flag", ["--lr-schedule", "--warmup-steps"])
def test_the_schedule_help_names_every_schedule(flag):
    help_text = _help("train", flag)
    for schedule in LR_SCHEDULES:
        assert schedule in help_text, (flag, schedule)
    assert f"default: {TrainConfig().lr_schedule}" in _help("train", "--lr-schedule")


def test_patience_counts_validations_of_the_best_by_score():
    help_text = _help("train", "--patience")
    assert "validations" in help_text and "best_by" in help_text
    assert "epochs" not in help_text
    assert "chrF by default" in help_text and TrainConfig().best_by == "chrf"


@pytest.mark.parametrize("command", ["translate", "evaluate", "export"])
def test_quiet_does_not_promise_training_output_to_other_commands(command):
    assert "other commands: no effect" in _help(command, "--quiet")


def test_accumulation_and_tensorboard_have_their_flags():
    assert "gradient_accumulation_steps" in _help("train", "--accumulate-steps")
    assert "default: 1" in _help("train", "--accumulate-steps")
    args = build_parser().parse_args(
        ["train", "--data", "x.tsv", "--out", "r", "--no-tensorboard"]
    )
    assert args.tensorboard is False
    assert "RUN_DIR/tensorboard" in _help("train", "--tensorboard")
