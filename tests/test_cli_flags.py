"""keras_selfattn.cli.flags: config fields as flags, in the command line's words."""

import argparse
import dataclasses

import pytest

from keras_selfattn.cli import flags
from keras_selfattn.cli.option_help import HELP
from keras_selfattn.cli.parser import build_parser
from keras_selfattn.config import ModelConfig, TrainConfig
from tests.bad_input_cases import run_in_process


def _train_help(flag):
    """The help line of train's ``flag``, its whitespace collapsed."""
    commands = next(
        action
        for action in build_parser()._actions
        if isinstance(action, argparse._SubParsersAction)
    ).choices
    (action,) = [a for a in commands["train"]._actions if flag in a.option_strings]
    return " ".join(action.help.split())


def test_a_switch_without_a_help_line_reads_its_docstring_as_flags(monkeypatch):
    """A field with no short line in `HELP` gets its docstring entry: True and
    False become the switch's own ``--x`` / ``--no-x`` ("when True": "with
    --x"), None "none", Python references dropped."""
    monkeypatch.delitem(HELP, "norm_first")
    monkeypatch.delitem(HELP, "jit_compile")
    assert _train_help("--norm-first") == (
        "pre-layer-norm blocks with --norm-first, post-layer-norm (the original "
        "Transformer and d2l) with --no-norm-first. (default: yes)"
    )
    jit = _train_help("--jit-compile")
    assert jit.startswith(
        "compile the train step with XLA: --jit-compile (the default), "
        "--no-jit-compile, or none: XLA where the step runs on a GPU or TPU"
    ), jit
    assert "True" not in jit and "False" not in jit and "None" not in jit
    assert "`" not in jit and "``" not in jit


def test_a_switch_in_an_error_is_written_as_the_flag_that_sets_it():
    """``name=True`` of a switch is ``--name``, ``name=False`` ``--no-name``; a
    value field is ``--name value``; Python's own words stay elsewhere."""
    message = (
        "tie_embeddings=True needs norm_first=False here. Received: "
        "tie_embeddings=True, norm_first=True, num_layers=0"
    )
    spelled = flags.cli_spelling(
        message,
        ["tie_embeddings", "norm_first", "num_layers"],
        switches=["tie_embeddings", "norm_first"],
    )
    assert spelled == (
        "--tie-embeddings needs --no-norm-first here. Received: "
        "--tie-embeddings, --norm-first, --num-layers 0"
    )
    # Not a switch: the value as typed after the flag.
    assert flags.cli_spelling("max_pairs=True", ["max_pairs"]) == "--max-pairs True"


def test_every_train_field_needs_a_group_in_the_help():
    """A `TrainConfig` field that `TRAIN_GROUPS` places in no group is refused by
    name when train's parser is built, rather than left out of its help."""
    extended = dataclasses.make_dataclass(
        "ExtendedTrainConfig", [("warmup_shape", str, "linear")], bases=(TrainConfig,)
    )
    parser = argparse.ArgumentParser()
    with pytest.raises(ValueError, match=r"places no group for \['warmup_shape'\]"):
        flags.add_grouped_config_arguments(
            flags.train_groups(parser), ModelConfig, extended, skip=("split",)
        )


@dataclasses.dataclass
class _Window:
    """A config with its own checks, as `config_from_args` sees them.

    Attributes:
        width: the window's width.
        height: the window's height.
    """

    width: int = 4
    height: int = 3

    def __post_init__(self):
        if self.width * self.height > 100:
            raise ValueError("the area must be at most 100")
        if self.width < 0:
            raise ValueError(f"a half-width must be >= 0. Received: {self.width}")


def _window_args(**given):
    return argparse.Namespace(**{"width": None, "height": None, **given})


def test_an_error_naming_no_flag_given_passes_through_unchanged():
    with pytest.raises(ValueError) as refused:
        flags.config_from_args(_Window, _window_args(width=20, height=20))
    assert str(refused.value) == "the area must be at most 100"
    assert flags.config_from_args(_Window, _window_args(height=5)) == _Window(4, 5)


def test_a_flag_the_error_names_in_other_words_is_added_after_it():
    """Where the message names a given field in a way the respelling leaves
    (``half-width``), the flag it came from follows the message."""
    with pytest.raises(ValueError) as refused:
        flags.config_from_args(_Window, _window_args(width=-2))
    assert str(refused.value) == (
        "a half-width must be >= 0. Received: -2 (from --width)"
    )


@pytest.mark.parametrize(
    "argv, shown",
    [
        (["translate", "--model", "{run}", "--beam", "two", "x"], "--beam"),
        (["average", "--model", "{run}", "--last", "2.5"], "--last"),
    ],
)
def test_a_count_that_is_not_an_integer_is_refused_by_name(argv, shown, tmp_path):
    value = argv[argv.index(shown) + 1]
    result = run_in_process([arg.format(run=tmp_path) for arg in argv])
    assert result.status == 2, result
    (line,) = result.stderr.strip().splitlines()[-1:]
    assert f"argument {shown}: must be an integer >= " in line, line
    assert f"Received: {value!r}" in line, line
