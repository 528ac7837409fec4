"""The command line without a trained run: the package's names, option help, bad input.

Most of these run in this process, so they are fast; the cases that need a trained
run are in ``tests/test_cli.py`` (one shared tiny run).
"""

import argparse
import dataclasses
import io
import json
import os
import pathlib
import sys
import zipfile

import pytest

from keras_selfattn import cli
from keras_selfattn.cli import (
    checks,
    command,
    commands,
    errors,
    flags,
    option_help,
    quiet,
    run_commands,
    serving_commands,
    text_commands,
)
from keras_selfattn.config import ModelConfig, TrainConfig
from keras_selfattn.run_directory.settings import load_run_config
from tests.bad_input_cases import CASES, CLEAR, SKIPPED, Workspace, run_case

HEAVY = ("tensorflow", "keras", "jax", "tensorflow_text")


@pytest.fixture(autouse=True)
def _clean_keras_state():
    """Replaces conftest's: these tests build no Keras model, so there is no state to
    reset."""
    yield


def test_the_public_names_are_the_real_objects():
    import keras_selfattn as ksa
    from keras_selfattn import layers, training
    from keras_selfattn.layers.positional_encoding import PositionalEncoding
    from keras_selfattn.models.seq2seq import build_seq2seq
    from keras_selfattn.training import train as train_module_import  # noqa: F401

    assert ksa.layers is layers
    assert ksa.layers.PositionalEncoding is PositionalEncoding
    assert ksa.build_seq2seq is build_seq2seq
    # training/train.py has been imported: the package's `train` is still the function.
    import keras_selfattn.training.fit.train

    assert callable(training.train) and training.train.__name__ == "train"
    assert set(training.__all__) <= set(dir(training))
    with pytest.raises(AttributeError, match="has no attribute 'nothing'"):
        _ = ksa.nothing


def test_every_option_has_a_description_and_its_default():
    parser = cli.build_parser()
    subparsers = next(
        action for action in parser._actions if action.dest == "command"
    ).choices
    for name, sub in subparsers.items():
        for action in sub._actions:
            if action.dest == "help":
                continue
            flag = action.option_strings[0] if action.option_strings else action.dest
            text = action.help or ""
            assert len(text) > 12, (name, flag)
            if action.nargs == 0:  # a switch: off unless given
                continue
            assert "default" in text or "required" in text or action.required, (
                name,
                flag,
            )


def test_option_help_is_one_short_line_and_the_docstrings_the_long_one():
    """Every config field is documented in its class; the flag shows its short line
    (`cli.option_help`), a field without one its docstring entry in the command
    line's words."""
    for config in (ModelConfig, TrainConfig):
        docs = flags.field_docs(config)
        assert set(docs) == {f.name for f in dataclasses.fields(config)}, config
    docs = flags.field_docs(TrainConfig)
    # An entry spanning several docstring lines is joined into one.
    assert docs["batch_size"].startswith("the *global* batch size")
    assert docs["batch_size"].endswith("or a TPU.")
    train = next(
        action for action in cli.build_parser()._actions if action.dest == "command"
    ).choices["train"]
    helps = {action.dest: action.help for action in train._actions}
    assert helps["batch_size"] == option_help.HELP["batch_size"] + " (default: 64)"
    assert helps["max_pairs"].endswith("(default: all)")
    assert helps["jit_compile"].endswith("(default: yes)")
    # the docstring entry, in the command line's words: the flag for the field
    in_flags = docs["batch_size"].replace("(batch_size /", "(--batch-size /")
    assert in_flags != docs["batch_size"]
    spelled = flags._help_spelling(docs["batch_size"], TrainConfig, "batch_size", False)
    assert spelled == in_flags
    shown = {
        f.name for cls in (ModelConfig, TrainConfig) for f in dataclasses.fields(cls)
    }
    assert shown - {"split"} == set(option_help.HELP)


def test_progress_lines(monkeypatch):
    """Bars on a terminal, one line per epoch (Keras verbose=2) otherwise, none with
    --quiet."""

    class Stdout:
        def __init__(self, tty):
            self.tty = tty

        def isatty(self):
            return self.tty

    args = cli.build_parser().parse_args(["train", "--data", "d", "--out", "o"])
    for tty, expected in ((True, 1), (False, 2)):
        monkeypatch.setattr(sys, "stdout", Stdout(tty))
        assert command.progress(args) == expected
    quiet = cli.build_parser().parse_args(
        ["train", "--quiet", "--data", "d", "--out", "o"]
    )
    assert command.progress(quiet) == 0
    # The output options are accepted before the subcommand too.
    early = cli.build_parser().parse_args(
        ["--quiet", "train", "--data", "d", "--out", "o"]
    )
    assert early.quiet and not early.debug


def test_tensorflow_log_level(monkeypatch):
    """Silenced whatever the user set (TF 2.21 prints at import under every
    level); only --verbose/--debug, which skip this call, leave it alone."""
    monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL", raising=False)
    quiet.quiet_tensorflow()
    assert os.environ["TF_CPP_MIN_LOG_LEVEL"] == "3"
    for level in ("0", "1", "2", "3"):
        monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", level)
        quiet.quiet_tensorflow()
        assert os.environ["TF_CPP_MIN_LOG_LEVEL"] == "3"


def test_native_log_lines_are_dropped_and_the_rest_kept(capfd):
    with quiet.native_stderr_filtered():
        os.write(2, b"W0000 00:00:1796071465.895658   10740 cudart_stub.cc:31] noise\n")
        os.write(
            2, b"2026-11-30 20:00:00.123456: E tensorflow/core/x.cc:1] old noise\n"
        )
        os.write(2, b"a real message\n")
    assert capfd.readouterr().err == "a real message\n"


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"epochs": True}, "epochs must be an integer. Received: epochs=True"),
        ({"learning_rate": "0.1"}, "learning_rate must be a number"),
        ({"learning_rate": float("inf")}, "learning_rate must be a finite number"),
        ({"max_pairs": 0}, "max_pairs must be an integer >= 1"),
        ({"jit_compile": 1}, "jit_compile must be true or false or None"),
        ({"jit_compile": "auto"}, "jit_compile must be true or false or None"),
        ({"label_smoothing": 1}, "label_smoothing must be an integer >= 0 and < 1"),
        ({"seed": 2**32}, "seed must be an integer >= 0 and <= 4294967295"),
        ({"split": (0.5, 0.5)}, "split must be three fractions"),
        ({"split": ("a", "b", "c")}, "split must be three fractions"),
        ({"tpu": 3}, "tpu must be a string or None"),
    ],
)
def test_train_config_refuses(kwargs, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        TrainConfig(**kwargs)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"num_layers": -1}, "num_layers must be an integer >= 0"),
        ({"dropout": -0.5}, "dropout must be a number >= 0 and < 1"),
        ({"max_source_len": 0}, "max_source_len must be an integer >= 1"),
        ({"norm_first": "yes"}, "norm_first must be true or false"),
        ({"num_hiddens": 10, "num_heads": 4}, "divisible by num_heads"),
    ],
)
def test_model_config_refuses(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ModelConfig(**kwargs)


def test_configs_accept_their_edges():
    assert TrainConfig(label_smoothing=0.0, warmup_steps=0, patience=0, seed=0)
    assert TrainConfig(learning_rate=1, split=[0.5, 0.25, 0.25]).split == (
        0.5,
        0.25,
        0.25,
    )
    assert ModelConfig(num_layers=0, dropout=0.0).num_layers == 0


def test_run_config_file_errors_name_the_file(tmp_path):
    path = tmp_path / "config.json"
    good = {
        "model": dataclasses.asdict(ModelConfig()),
        "train": dataclasses.asdict(TrainConfig()),
    }
    path.write_text(json.dumps(good))
    assert load_run_config(path) == (ModelConfig(), TrainConfig())
    old = json.loads(json.dumps(good))
    del old["train"]["tpu"]  # saved before the field existed: its default
    path.write_text(json.dumps(old))
    assert load_run_config(path)[1].tpu is None
    for payload, message in [
        ("[1, 2]", 'must hold a "model" and a "train" object'),
        ('{"model": {}}', 'must hold a "model" and a "train" object'),
        ('{"model": [], "train": {}}', "expected an object of ModelConfig fields"),
        (
            '{"model": {"colour": 1}, "train": {}}',
            r"unknown ModelConfig fields \['colour'\]",
        ),
        (
            '{"model": {}, "train": {"epochs": "ten"}}',
            '"train": epochs must be an integer',
        ),
        ('{"model": ', "is not a JSON configuration"),
    ]:
        path.write_text(payload)
        with pytest.raises(ValueError, match=message) as error:
            load_run_config(path)
        assert str(path) in str(error.value)


def _param(case):
    return pytest.param(
        case, id=case.name, marks=[pytest.mark.slow] if case.slow else []
    )


@pytest.mark.parametrize(
    "case", [_param(c) for c in CASES if not c.needs_run and not c.checked_in]
)
def test_bad_input_case(case, tmp_path):
    """Each case of tests/bad_input_cases.py without a trained run ends as expected
    (but those another test asserts: `Case.checked_in`)."""
    outcome, argv, result = run_case(case, Workspace(tmp_path))
    if outcome == SKIPPED:
        pytest.skip(result.stderr)
    assert outcome == case.expect, (argv, result)
    if outcome == CLEAR:  # one line, no traceback
        assert result.stderr.count("\n") == 1, result.stderr


@pytest.mark.parametrize(
    "error, status, words",
    [
        (RuntimeError("boom"), 70, ("internal error: RuntimeError: boom", "--debug")),
        (
            ModuleNotFoundError("No module named 'matplotlib'", name="matplotlib"),
            2,
            ("error: No module named 'matplotlib'", "keras-selfattn[serving,plots]"),
        ),
        (  # our own module missing is a bug, not a missing extra
            ModuleNotFoundError("No module named 'x'", name="keras_selfattn.x"),
            70,
            ("internal error: ModuleNotFoundError",),
        ),
        (KeyboardInterrupt(), 130, ("interrupted; rerun the same command",)),
    ],
)
def test_unexpected_errors_are_one_line_and_debug_shows_them(
    error, status, words, monkeypatch, capsys, tmp_path
):
    def run(args):
        raise error

    monkeypatch.setattr(commands, "_run", run)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "d.tsv").write_text("un\tone\n")  # checked before _run
    argv = ["train", "--data", "d.tsv", "--out", "o"]
    with pytest.raises(SystemExit) as exited:
        cli.main(argv)
    err = capsys.readouterr().err
    assert exited.value.code == status
    assert err.count("\n") == 1 and all(word in err for word in words), err
    if isinstance(
        error, Exception
    ):  # --debug: the traceback (an interrupt stays one line)
        with pytest.raises(type(error)):
            cli.main(["train", "--debug", *argv[1:]])


def test_data_must_be_a_regular_file(tmp_path):
    """The corpus is streamed more than once: a pipe (`<(zcat ...)`) is refused by
    name (a .gz file is read as it is), and so is a device."""
    fifo = tmp_path / "pairs"
    os.mkfifo(fifo)
    parser = cli.build_parser()
    with pytest.raises(ValueError, match="is a pipe"):
        checks.check_argument_paths(
            parser.parse_args(["train", "--data", str(fifo), "--out", "o"])
        )
    with pytest.raises(ValueError, match="/dev/null is a device or socket"):
        checks.check_argument_paths(
            parser.parse_args(["train", "--data", "/dev/null", "--out", "o"])
        )


def _commands(parser):
    """``{name: parser}`` of the commands of the ``keras-selfattn`` parser."""
    return next(
        action for action in parser._actions if action.dest == "command"
    ).choices


def test_every_command_runs_its_own_function():
    """``add_<command>`` binds ``_<command>`` of its module
    (``set_defaults(run=...)``); `commands._run` calls it."""
    parsers = _commands(cli.build_parser())
    assert set(parsers) == {
        "demo",
        "build-vocab",
        "train",
        "evaluate",
        "translate",
        "distill-data",
        "merge-shards",
        "average",
        "shortlist",
        "export",
        "check-serving",
    }
    kinds = {
        run_commands: ("demo", "build-vocab", "train", "average"),
        text_commands: ("evaluate", "translate", "distill-data", "merge-shards"),
        serving_commands: ("export", "check-serving"),
    }
    for module, names in kinds.items():
        for name in names:
            assert parsers[name].get_default("run") is getattr(
                module, "_" + name.replace("-", "_")
            )
    args = cli.build_parser().parse_args(["translate", "--model", "m", "x"])
    args.run = lambda given: (given.model, given.text)
    assert commands._run(args) == ("m", ["x"])


def test_default_notes_are_written_by_one_pass():
    """`flags.append_defaults` writes every "(default: X)" and "(required)"; a switch
    gets none, a None "none", --x/--no-x yes or no, `flags.shows` a meaning."""
    parser = errors.Parser(prog="p")
    parser.add_argument("--size", type=int, default=5, help="a size")
    parser.add_argument("--rate", default="50%", help="a rate")
    parser.add_argument("--name", help="a name")
    parser.add_argument("--path", required=True, help="a path")
    parser.add_argument("--force", action="store_true", help="force it")
    flags.shows(parser.add_argument("--vocab", help="a vocabulary"), "learned")
    fast = parser.add_argument(
        "--fast", action=argparse.BooleanOptionalAction, default=None, help="go fast"
    )
    flags.shows(fast, True)
    parser.add_argument("words", nargs="+", help="some words")
    flags.append_defaults(parser)
    text = " ".join(parser.format_help().split())
    for shown in (
        "a size (default: 5)",
        "a rate (default: 50%)",
        "a name (default: none)",
        "a path (required)",
        "a vocabulary (default: learned)",
        "go fast (default: yes)",
    ):
        assert shown in text, (shown, text)
    assert "force it (" not in text and "some words (" not in text


def test_every_command_help_shows_its_defaults_once():
    """No declaration spells its own default: each option's help holds at most one
    note, and ``--help`` shows the defaults the declarations set."""
    commands = _commands(cli.build_parser())
    for name, parser in commands.items():
        for action in parser._actions:
            notes = (action.help or "").count("(default:")
            notes += (action.help or "").count("(required)")
            assert notes <= 1, (name, action.help)
    shown = {
        "demo": ["--out DIR run directory (default: runs/demo)"],
        "evaluate": ["--beam K beam size (default: 1, greedy search)"],
        "translate": ["--model RUN_DIR run directory (required)"],
        "export": [
            "translate_nbest signature (default: 4)",
            "docker line) (default: translator)",
            "version number (default: highest + 1)",
        ],
        "train": [
            "(default: held out of --data)",
            "the defaults shown below)",
            "--batch-size N",
            "(default: 64)",
            "--[no-]jit-compile",
        ],
        "check-serving": ["TF Serving release to audit against (default: all)"],
    }
    for name, expected in shown.items():
        text = " ".join(commands[name].format_help().split())
        for words in expected:
            assert words in text, (name, words)


def test_a_model_keras_cannot_load_is_named_by_its_type(tmp_path):
    """Keras' own error while loading model.keras (here a class it cannot
    locate) comes out of `load_translator` as an `inference.ModelFileError`
    that leads with the file and the class, with Keras' error behind it."""
    from keras_selfattn.inference import ModelFileError, load_translator

    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(
        json.dumps(
            {
                "model": dataclasses.asdict(ModelConfig()),
                "train": dataclasses.asdict(TrainConfig()),
            }
        )
    )
    with zipfile.ZipFile(run / "model.keras", "w") as archive:
        archive.writestr("metadata.json", "{}")
        archive.writestr("config.json", '{"class_name": "Nothing", "config": {}}')
    with pytest.raises(ModelFileError) as raised:
        load_translator(run)
    assert raised.value.path == run / "model.keras"
    assert isinstance(raised.value.__cause__.__cause__, TypeError)
    assert "Could not locate class 'Nothing'" in str(raised.value.__cause__.__cause__)
    assert str(raised.value).startswith(f"{run / 'model.keras'} uses class Nothing,")


def test_reading_classifies_errors_by_type(tmp_path):
    """A `ModelFileError` is named after the run's model.keras (by the error Keras
    raised); our own ValueErrors pass as they are; anything else names the run
    directory, or passes with ``only_loading``."""
    from keras_selfattn.inference import ModelFileError

    run = str(tmp_path / "run")

    def model_file_error():
        try:
            raise TypeError("Could not locate class 'Nothing'")
        except TypeError as error:
            raise ModelFileError(pathlib.Path(run) / "model.keras", error) from error

    def read(fail, only_loading=False):
        with errors.reading("the run directory", run, only_loading=only_loading):
            fail()

    def raising(error):
        def fail():
            raise error

        return fail

    for only_loading in (False, True):
        with pytest.raises(ValueError) as raised:
            read(model_file_error, only_loading)
        assert str(raised.value) == (
            f"cannot read {run}/model.keras: TypeError: Could not locate class "
            "'Nothing'"
        )
    own = ValueError(f"{run}/config.json: not JSON")
    with pytest.raises(ValueError) as raised:
        read(raising(own))
    assert raised.value is own
    with pytest.raises(ValueError, match=f"cannot read the run directory {run}: "):
        read(raising(KeyError("source")))
    with pytest.raises(KeyError):
        read(raising(KeyError("source")), only_loading=True)


@pytest.mark.parametrize(
    "make, line",
    [
        (
            lambda tf: tf.errors.ResourceExhaustedError(
                None,
                None,
                "{{function_node SaveV2}} base/.export-tmp-x1/saved_model/variables/"
                "part-0.tempstate1; No space left on device [Op:SaveV2]",
            ),
            "error: base: No space left on device",
        ),
        (
            lambda tf: tf.errors.PermissionDeniedError(
                None, None, "ro/run/events.out; Read-only file system"
            ),
            "error: ro/run/events.out: Read-only file system",
        ),
        (
            lambda tf: tf.errors.FailedPreconditionError(
                None, None, "/srv/out/ckpt.index; Permission denied"
            ),
            "error: /srv/out/ckpt.index: Permission denied",
        ),
    ],
)
def test_tensorflow_writers_full_disk_and_refusals_are_pythons_line(make, line):
    import tensorflow as tf

    wrapped = RuntimeError("Keras wrapped it")  # found through the causes
    wrapped.__cause__ = make(tf)
    for error in (make(tf), wrapped):
        assert errors.failure(error) == (2, line)


def test_a_data_file_removed_mid_stream_is_one_line_naming_it(tmp_path):
    """The stream reopens its files each pass: a removed one is TensorFlow's
    NotFoundError at IteratorGetNext, answered as the file gone (exit 2)."""
    import tensorflow as tf

    from keras_selfattn.text import stream

    path = tmp_path / "pairs.tsv"
    path.write_text("".join(f"{i}\tx{i}\n" for i in range(20)))
    pairs = iter(stream.pair_stream([str(path)], repeat=True))
    next(pairs)
    path.rename(tmp_path / "away.tsv")
    with pytest.raises(tf.errors.NotFoundError) as raised:
        for _ in range(100):
            next(pairs)
    status, message = errors.failure(raised.value)
    assert status == 2 and message.startswith(f"error: {path}: No such file")
    assert "rerun the same command" in message and "\n" not in message


@pytest.mark.parametrize(
    "fault, status, line",
    [
        (OSError(28, "No space left on device"), 2, "error: cannot write the output"),
        (BrokenPipeError(32, "Broken pipe"), 141, None),
    ],
)
def test_output_errors_are_one_line_or_a_quiet_broken_pipe(fault, status, line):
    class Failing(io.StringIO):
        def write(self, text):
            raise fault

    saved = sys.stdout
    sys.stdout = Failing()
    try:
        with pytest.raises(errors.OutputError) as raised, errors.guarded_output():
            print("a translation")
    finally:
        sys.stdout = saved
    got_status, message = errors.failure(raised.value)
    assert got_status == status
    assert message is None if line is None else message.startswith(line)


def test_pair_files_are_checked_before_the_command_runs(tmp_path, monkeypatch):
    """A missing --data answers in the argument checks, with the reader's words."""
    monkeypatch.chdir(tmp_path)
    args = cli.build_parser().parse_args(
        ["train", "--data", "nothere.tsv", "--out", "o"]
    )
    with pytest.raises(OSError) as raised:
        checks.check_arguments(args)
    assert str(raised.value).splitlines() == [
        "No sentence-pair file matches 'nothere.tsv' (file not found)",
    ]


def test_the_early_glob_matches_what_the_reader_reads(tmp_path, monkeypatch):
    """Python's glob skips dotfiles, tf.io.gfile.glob (the reader)
    does not: the check before TensorFlow matches as the reader does."""
    import tensorflow as tf

    for name in ("shards/.a.tsv", "shards/b.tsv", ".hidden/c.tsv", "shards/x.gz"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text("a\tb\n")
    patterns = ["shards/*.tsv", "*/*.tsv", "shards/?a.tsv", "shards/[.b]*", "*/c*"]
    patterns += ["shards/*.none", "none/*", "shards/.a.tsv"]
    monkeypatch.chdir(tmp_path)

    def same(paths):  # tf.io.gfile.glob writes "./x" where the first part is a glob
        return sorted(os.path.normpath(path) for path in paths)

    for pattern in (*patterns, *(str(tmp_path / p) for p in patterns)):
        got = checks.glob_matches(pattern)
        assert same(got) == same(tf.io.gfile.glob(pattern)), pattern
    parser = cli.build_parser()
    only_hidden = ["train", "--data", "shards/?a.tsv", "--out", "o"]
    checks.check_argument_paths(parser.parse_args(only_hidden))  # no error
    with pytest.raises(FileNotFoundError, match="No sentence-pair file matches"):
        checks.check_argument_paths(
            parser.parse_args(["train", "--data", "shards/*.none", "--out", "o"])
        )


def test_evaluate_takes_a_pipe_train_does_not(tmp_path):
    fifo = tmp_path / "pairs"
    os.mkfifo(fifo)
    parser = cli.build_parser()
    checks.check_argument_paths(
        parser.parse_args(["evaluate", "--model", str(tmp_path), "--data", str(fifo)])
    )
    for flag in ("--valid-data", "--test-data"):
        argv = ["train", "--data", str(fifo.with_name("x")), flag, str(fifo)]
        fifo.with_name("x").write_text("a\tb\n")
        with pytest.raises(ValueError, match=f"{flag} must be .* is a pipe"):
            checks.check_argument_paths(parser.parse_args([*argv, "--out", "o"]))
