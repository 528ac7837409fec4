"""The help says what the code does: options read against their fields' behaviour."""

import argparse
import dataclasses
import pathlib
import re

import pytest

from keras_selfattn import cli
from keras_selfattn.choices import LR_SCHEDULES
from keras_selfattn.cli import errors
from keras_selfattn.cli.parser import build_parser
from keras_selfattn.config import ModelConfig
from keras_selfattn.training import TrainConfig

PAGE = pathlib.Path(__file__).resolve().parents[1] / "docs" / "command-line.md"


def _page():
    """docs/command-line.md, its whitespace collapsed."""
    return " ".join(PAGE.read_text(encoding="utf-8").split())


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
    assert "optimizer update" in _help("train", "--accumulate-steps")
    assert "default: 1" in _help("train", "--accumulate-steps")
    # Keras' name for it, in the docs (the help speaks the command line's words)
    assert "gradient_accumulation_steps" in _page()
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


def test_the_preset_docs_name_a_module_that_imports_without_a_warning():
    """--preset's help names no module; docs/command-line.md says where every
    setting of the presets is."""
    import importlib
    import warnings

    assert "keras_selfattn" not in _help("train", "--preset")
    (module,) = set(re.findall(r"keras_selfattn(?:\.\w+)*\.presets", _page()))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        presets = importlib.import_module(module)
    assert set(presets.PRESETS) == set(
        _commands()["train"]._option_string_actions["--preset"].choices
    )


def _run(argv, capsys, monkeypatch):
    """``cli.main(argv)`` at 80 columns: (exit status, stdout, stderr)."""
    monkeypatch.setenv("COLUMNS", "80")
    with pytest.raises(SystemExit) as exited:
        cli.main(argv)
    out, err = capsys.readouterr()
    return exited.value.code, out, err


def test_train_help_fits_in_150_lines(capsys, monkeypatch):
    """One short line an option; the long explanations are in the docs."""
    status, out, err = _run(["train", "--help"], capsys, monkeypatch)
    assert status == 0 and err == ""
    assert len(out.splitlines()) <= 150, len(out.splitlines())


# Python's spelling: floor division, a module path, a class name (CamelCase, but
# not the names of the products the options are about), a doubled word ("epochs
# epochs", "--max-pairs MAX_PAIRS"-like metavars repeating the flag).
_PRODUCTS = {"TensorFlow", "TensorBoard", "SentencePiece", "WordPiece", "SavedModel"}
_PRODUCTS |= {"WriteFile"}  # the op check-serving refuses, as its report names it
_CAMEL_CASE = re.compile(r"\b[A-Z][a-z]+[A-Z]\w*")


@pytest.mark.parametrize("command", COMMANDS)
def test_help_has_no_python_spelling(command, capsys, monkeypatch):
    _, out, _ = _run([command, "--help"], capsys, monkeypatch)
    text = " ".join(out.split())
    assert not re.search(r"(?<!:)//", text)  # a URL's "grpc://" is no division
    assert "keras_selfattn" not in text
    assert set(_CAMEL_CASE.findall(text)) <= _PRODUCTS, command
    doubled = re.findall(r"(?i)(?<![\w-])(\w+) \1\b", text)
    assert not doubled, (command, doubled)
    for action in _commands()[command]._actions:
        flag = action.option_strings[-1] if action.option_strings else ""
        metavar = flag.lstrip("-").replace("-", "_").upper()
        assert f"{flag} {metavar} " not in text or len(metavar) < 2, (command, flag)


@pytest.mark.parametrize("command", COMMANDS)
def test_help_offers_only_values_the_options_take(command):
    """No "none" an option cannot be given, and every choice listed parses."""
    parser = _commands()[command]
    for action in parser._actions:
        text = " ".join((action.help or "").split())
        assert not re.search(r"\bnone\b", text), (command, action.dest, text)
        for choice in action.choices or ():
            assert action.type is None or action.type(choice) == choice
            parser._check_value(action, choice)  # raises for a value refused


@pytest.mark.parametrize(
    "argv, hint, help_line",
    [
        (
            ["train", "--data", "x.tsv", "--out", "r", "--epoch", "2"],
            "did you mean --epochs?",
            "keras-selfattn train --help",
        ),
        (
            ["translate", "--model", "r", "--bema", "2"],
            "did you mean --beam?",
            "keras-selfattn translate --help",
        ),
        (["trian", "--data", "x"], "did you mean train?", "keras-selfattn --help"),
        (
            ["train", "--data", "x", "--out", "r", "--best-by", "chrff"],
            "did you mean chrf?",
            "keras-selfattn train --help",
        ),
    ],
)
def test_a_mistyped_name_gets_the_closest_one(argv, hint, help_line, capsys):
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(argv)
    assert exited.value.code == errors.USAGE_ERROR
    (line,) = capsys.readouterr().err.splitlines()
    assert hint in line and f"(see {help_line})" in line, line


def test_an_unknown_option_points_to_its_command_s_help(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["export", "--model", "r", "--export-dir", "e", "x"])
    (line,) = capsys.readouterr().err.splitlines()
    assert line == (
        "keras-selfattn export: error: unrecognized arguments: x "
        "(see keras-selfattn export --help)"
    )


def test_version_prints_the_installed_version(capsys, monkeypatch):
    from keras_selfattn.version import __version__, installed_version

    status, out, err = _run(["--version"], capsys, monkeypatch)
    assert status == 0 and err == ""
    assert out == f"keras-selfattn {installed_version()}\n"
    assert installed_version() == __version__  # the source is what is installed


def test_version_falls_back_to_the_source_s_own(monkeypatch):
    import importlib.metadata

    from keras_selfattn import version

    def not_installed(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", not_installed)
    assert version.installed_version() == version.__version__


def test_export_keeps_its_own_version_option():
    args = build_parser().parse_args(
        ["export", "--model", "r", "--export-dir", "e", "--version", "3"]
    )
    assert args.version == 3
