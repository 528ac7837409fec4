"""The help says what the code does: options read against their fields' behaviour."""

import argparse
import dataclasses
import re

import pytest

from keras_selfattn.choices import LR_SCHEDULES
from keras_selfattn.cli import errors
from keras_selfattn.cli.commands import build_parser
from keras_selfattn.config import ModelConfig
from keras_selfattn.training import TrainConfig


def _commands():
    """``{name: parser}`` of the keras-selfattn commands."""
    parser = build_parser()
    subparsers = next(
        a for a in parser._actions if isinstance(a, argparse._SubParsersAction)
    )
    return subparsers.choices


def _help(command, flag):
    command_parser = _commands()[command]
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
    assert "validations" in help_text and "--best-by" in help_text
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


COMMANDS = sorted(_commands())
# Python's words, which the command line does not speak: a config field's name
# (max_pairs: the flag is --max-pairs), name=value, None/True/False, call syntax
# and `references` to Python names.
_FIELDS = [
    field.name
    for cls in (ModelConfig, TrainConfig)
    for field in dataclasses.fields(cls)
    if "_" in field.name
]
_PYTHON_WORDS = re.compile(
    r"(?<![\w-])(?:" + "|".join(_FIELDS) + r")\b|(?<![\w-])[a-z_]+=|\bNone\b|\bTrue\b"
    r"|\bFalse\b|\w\(\w+=|`"
)


@pytest.mark.parametrize("command", COMMANDS)
def test_help_speaks_the_command_line_s_words(command):
    """No Python parameter names, None/True/False or call syntax in --help."""
    help_text = _commands()[command].format_help()
    _, _, options = help_text.partition("\n\n")  # usage lists the choices
    found = sorted({match.group() for match in _PYTHON_WORDS.finditer(options)})
    assert not found, (command, found)


@pytest.mark.parametrize("command", COMMANDS)
def test_each_command_says_what_it_does(command):
    """Each command's --help opens with one line saying what it does."""
    parser = _commands()[command]
    assert parser.description, command
    first = parser.format_help().split("\n\n")[1]
    assert first.strip() and "\n" not in parser.description.split(". ")[0], command


@pytest.mark.parametrize(
    "argv, prefix",
    [
        (["train", "--data", "x.tsv", "--out", "r", "--epoch", "2"], "--epoch"),
        (
            ["train", "--data", "x.tsv", "--out", "r", "--num-hidden", "8"],
            "--num-hidden",
        ),
        (["translate", "--model", "r", "--bea", "2", "x"], "--bea"),
        (["--verb", "demo"], "--verb"),
    ],
)
def test_a_prefix_of_an_option_is_refused(argv, prefix, capsys):
    """Exact option names only: a prefix is the usual usage error, not taken for
    the option it starts."""
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(argv)
    assert exited.value.code == errors.USAGE_ERROR
    (line,) = capsys.readouterr().err.splitlines()
    assert "error:" in line and prefix in line, line


def test_every_parser_takes_exact_option_names_only():
    assert build_parser().allow_abbrev is False
    for command, parser in _commands().items():
        assert parser.allow_abbrev is False, command


def test_train_options_come_in_named_groups_common_first():
    """train's options: data, run directory, training, validation, model and
    speed groups in that order, the options every run sets at the top."""
    groups = _commands()["train"]._action_groups
    titles = [group.title for group in groups]
    order = ["data", "run directory", "training", "validation", "model", "speed"]
    assert [title for title in titles if title in order] == order, titles
    dests = {
        group.title: [action.dest for action in group._group_actions]
        for group in groups
    }
    assert dests["data"][:3] == ["data", "valid_data", "test_data"], dests["data"]
    assert dests["run directory"][:2] == ["out", "overwrite"]
    assert dests["training"][:3] == ["preset", "epochs", "train_steps"]
    grouped = [dest for title in order for dest in dests[title]]
    fields = [
        f.name for cls in (ModelConfig, TrainConfig) for f in dataclasses.fields(cls)
    ]
    options = {*fields, "data", "valid_data", "test_data", "vocab", "out"}
    options |= {"overwrite", "preset", "figures"}
    assert sorted(grouped) == sorted(options - {"split"})


def test_the_preset_help_names_a_module_that_imports_without_a_warning():
    import importlib
    import warnings

    help_text = _help("train", "--preset")
    (module,) = re.findall(r"keras_selfattn(?:\.\w+)+", help_text)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        presets = importlib.import_module(module)
    assert set(presets.PRESETS) == set(
        _commands()["train"]._option_string_actions["--preset"].choices
    )
