"""The keras-selfattn command end to end on one tiny trained run.

The command runs in this process (`tests.bad_input_cases.run_in_process`: `main`
with its output and status captured) except where only a process shows the
behaviour: TensorFlow's native log lines (a started process), a pipe left open,
a stop signal and its exit status (a process forked from one that has imported
TensorFlow, `tests.forked_commands`)."""

import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import threading
import time

import pytest

from keras_selfattn import text
from tests import forked_commands
from tests.bad_input_cases import (
    CASES,
    CLEAR,
    WHERE_IT_HANGS,
    Workspace,
    ended_within,
    run_case,
    run_in_process,
)
from tests.training import reference_run

# One xdist worker runs the whole module, so the trained-run fixture is built once.
pytestmark = pytest.mark.slow
REPO = pathlib.Path(__file__).resolve().parents[1]
# A TensorFlow C++ log line (absl's format, and TF's older one).
TF_LOG_LINE = re.compile(
    r"^([IWEF]\d{4} [\d:.]+ +\d+ \S+:\d+\]|\d{4}-\d\d-\d\d [\d:.]+: [IWEF] "
    r"|WARNING: All log messages before absl)",
    re.MULTILINE,
)


def user_env():
    """The environment of a user who never heard of TF_CPP_MIN_LOG_LEVEL."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("TF_CPP_MIN_LOG_LEVEL", None)
    return env


def cli(*args, stdin=None, check=True):
    """Runs the command as a user does; its stderr never holds a TF C++ log line."""
    result = subprocess.run(
        [sys.executable, "-m", "keras_selfattn", *map(str, args)],
        input=stdin,
        check=False,
        capture_output=True,
        text=True,
        env=user_env(),
        timeout=600,
    )
    if check:
        assert result.returncode == 0, result.stderr[-3000:]
    if "--verbose" not in args:
        assert not TF_LOG_LINE.search(result.stderr), result.stderr[-3000:]
    return result


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory):
    """The command line's tiny run (`reference_run.command_line_run`: ``train
    --epochs 2`` with the options of TINY_RUN_WITH_FIGURES: its plots are looked
    at; shared with test_continuation.py), checked as cli() checks a command."""
    shared = reference_run.command_line_run(tmp_path_factory)
    assert shared.status == 0, shared.stderr[-3000:]
    assert not TF_LOG_LINE.search(shared.stderr), shared.stderr[-3000:]
    return shared.root, shared


def test_train_writes_a_run_and_reports(trained_run):
    root, result = trained_run
    assert "evaluated: the run's test split (" in result.stdout
    assert "exact match" in result.stdout and "held-out" not in result.stdout
    # Piped: our step lines, one per validation here; no bars, no epoch words.
    assert "\x1b[" not in result.stdout and "━" not in result.stdout
    assert "Epoch" not in result.stdout
    # each validation's figures on a line of their own
    assert re.search(
        r"^validation at step 14/14:  loss [\d.]+  val_loss [\d.]+  "
        r"[\d,]+ target tokens/s",
        result.stdout,
        re.MULTILINE,
    )
    run = root / "run"
    # --epochs 2: two passes over the training pairs the run counted, in steps.
    counted = json.loads((run / "data.json").read_text())["train_pairs"]
    finished = json.loads((run / "training.json").read_text())
    assert (
        finished["steps"] == counted // 32 * 2 > 0
    )  # --batch-size 32 (TINY_RUN_WITH_FIGURES)
    metrics = json.loads((run / "metrics.json").read_text())
    assert {"bleu", "chrf", "exact_match"} <= set(metrics["test"])
    for name in ("positional_encoding.png", "history.png", "attention_0.png"):
        png = run / "plots" / name
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name


def test_evaluate_and_translate(trained_run):
    root, _ = trained_run
    run = root / "run"
    # --json: stdout is one JSON object and nothing else.
    evaluated = run_in_process(
        ["evaluate", "--model", str(run), "--beam", "2", "--json"]
    )
    assert evaluated.status == 0, evaluated.stderr
    scores = json.loads(evaluated.stdout)
    assert scores["count"] > 0 and 0 <= scores["exact_match"] <= 1
    assert "examples" not in scores and scores["beam_size"] == 2
    # Without it, the human summary alone.
    result = run_in_process(["evaluate", "--model", str(run), "--beam", "2"])
    assert result.status == 0, result.stderr
    test_split = run / "splits" / "test.tsv"
    assert result.stdout.startswith(
        f"evaluated: the run's test split ({test_split}): {scores['count']} pairs, "
        "beam 2 search\n"
    )
    assert "{" not in result.stdout
    # --data FILE: the whole file is scored, and the report says which and how much.
    given = text.write_pairs(root / "some.tsv", text.read_pairs(test_split)[:7])
    result = run_in_process(
        ["evaluate", "--model", str(run), "--data", str(given), "--json"]
    )
    assert result.status == 0, result.stderr
    assert json.loads(result.stdout)["data"] == str(given)
    assert json.loads(result.stdout)["count"] == 7
    translated = run_in_process(
        ["translate", "--model", str(run), "--scores", "14 juillet 1989", "", "zzz qqq"]
    )
    assert translated.status == 0, translated.stderr
    lines = translated.stdout.split("\n")
    assert len(lines) == 4 and lines[3] == ""  # three inputs, three lines
    _text_part, score = lines[0].split("\t")
    assert float(score) <= 0.0
    assert lines[1] == "\t0.0000"  # empty input: empty translation
    # Piped: a sentence a line, even an over-long one or one that is not UTF-8.
    piped = run_in_process(
        ["translate", "--model", str(run)],
        stdin=b"14 juillet 1989\n" + b"word " * 200 + b"\n14 juillet \xff\xfe1989\n",
    )
    assert piped.status == 0 and "Traceback" not in piped.stderr, piped.stderr
    assert "truncated to" in piped.stderr
    assert len(piped.stdout.strip().split("\n")) == 3


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["translate", "--model", "/nonexistent/run", "x"],
            "Run directory not found: ",
        ),
        (["evaluate", "--model", "/nonexistent/run"], "Run directory not found"),
        # `train --out RUN` alone resumes or continues the run there; with none
        (
            ["train", "--out", "/nonexistent/run"],
            (
                "--data is required: --out /nonexistent/run holds no run to resume "
                "or continue. Received: no --data"
            ),
        ),
    ],
)
def test_errors_are_one_line_without_traceback(args, message):
    """In this process: `main`'s status and lines are the process's (the console
    script's own start and end: tests/test_console_script.py)."""
    result = run_in_process(args)
    assert result.status == 2 and result.stderr.count("\n") == 1, result.stderr
    assert message in result.stderr and "Traceback" not in result.stderr


def test_malformed_and_empty_tsv(tmp_path):
    """A malformed and an empty pair file: exit 2, one line naming the file."""
    bad = tmp_path / "bad.tsv"
    bad.write_text("un\tone\ndeux sans tabulation\n")
    result = run_in_process(
        ["train", "--data", str(bad), "--out", str(tmp_path / "run")]
    )
    assert result.status == 2 and "bad.tsv:2" in result.stderr, result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    empty = tmp_path / "empty.tsv"
    empty.write_text("")
    result = run_in_process(
        ["train", "--data", str(empty), "--out", str(tmp_path / "run")]
    )
    assert (
        result.status == 2
        and "empty.tsv" in result.stderr
        and "Traceback" not in result.stderr
    )


def test_text_options_accept_only_their_choices(capsys):
    """Every enumerated option lists its values and rejects others as a usage error
    (exit 2)."""
    from keras_selfattn.cli import build_parser
    from keras_selfattn.config import ModelConfig, TrainConfig
    from keras_selfattn.layers.bahdanau_attention import SCORES
    from keras_selfattn.layers.bahdanau_decoder_cell import RNN_TYPES
    from keras_selfattn.training.distribute.strategy import STRATEGIES

    # The configs' lists are the very ones the layers and get_strategy check against.
    assert ModelConfig.CHOICES["rnn_type"] is RNN_TYPES
    assert ModelConfig.CHOICES["attention_score"] is SCORES
    assert TrainConfig.CHOICES["strategy"] is STRATEGIES
    parser = build_parser()
    base = ["train", "--data", "x.tsv", "--out", "run"]
    for config in (ModelConfig, TrainConfig):
        for name, allowed in config.CHOICES.items():
            flag = "--" + name.replace("_", "-")
            assert (
                getattr(parser.parse_args([*base, flag, allowed[-1]]), name)
                == allowed[-1]
            )
            with pytest.raises(SystemExit) as exited:
                parser.parse_args([*base, flag, "bogus"])
            assert exited.value.code == 2
            assert (
                f"argument {flag}: invalid choice: 'bogus'" in capsys.readouterr().err
            )
    with pytest.raises(
        ValueError, match="position must be one of .* Received: position='bogus'"
    ):
        ModelConfig(position="bogus")


def test_verbose_brings_tensorflow_logs_back(trained_run, tmp_path):
    """--verbose shows what a bare `import tensorflow` prints here (none if it
    prints none)."""
    root, _ = trained_run
    bare = subprocess.run(
        [sys.executable, "-c", "import tensorflow as tf; tf.constant(1) + 1"],
        capture_output=True,
        text=True,
        env=user_env(),
        timeout=600,
        check=False,
    )
    verbose = cli("translate", "--verbose", "--model", root / "run", "x")
    shown = TF_LOG_LINE.findall(verbose.stderr)
    assert bool(shown) == bool(TF_LOG_LINE.findall(bare.stderr)), verbose.stderr


@pytest.mark.parametrize(
    "case", [pytest.param(c, id=c.name) for c in CASES if c.needs_run]
)
def test_bad_input_case_on_a_trained_run(case, trained_run, tmp_path):
    """Each case of tests/bad_input_cases.py that needs a run ends as expected."""
    root, _ = trained_run
    outcome, argv, result = run_case(case, Workspace(tmp_path, run=root / "run"))
    assert outcome == case.expect, (argv, result)
    if outcome == CLEAR:
        assert result.stderr.count("\n") == 1, result.stderr


# (demo's TensorFlow start-up is train's, which the trained_run fixture checks;
# check-serving's, stopped at a SavedModel that does not parse, is
# tests/test_quiet_tensorflow.py's, under every TF_CPP_MIN_LOG_LEVEL.)
def test_no_tensorflow_log_lines_from_export(trained_run, tmp_path):
    """A cheap run that loads TensorFlow and the model, then stops at a bad export
    path; cli() checks stderr."""
    root, _ = trained_run
    below_file = tmp_path / "plain-file"
    below_file.write_text("")
    argv = ["export", "--model", root / "run", "--export-dir", below_file / "b"]
    result = cli(*argv, check=False)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr


def _translate_process(run, *args, **popen):
    """``keras-selfattn translate``, forked (its start-up is not the question;
    its stop signals at their defaults, as a terminal starts it)."""
    return forked_commands.command(
        ["translate", "--model", str(run), *args],
        env={**user_env(), **WHERE_IT_HANGS},
        **popen,
    )


def test_translate_answers_each_line_on_an_open_pipe(trained_run):
    """A co-process writes a line, keeps the pipe open and reads the answer; then
    another: each is answered at once, not at the end of the input."""
    root, _ = trained_run
    process = _translate_process(
        root / "run", stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    answers = []

    def answer_of(line, timeout):
        process.stdin.write(line)
        process.stdin.flush()
        reader = threading.Thread(
            target=lambda: answers.append(process.stdout.readline())
        )
        reader.start()
        reader.join(timeout)
        assert not reader.is_alive(), f"no answer to {line!r} in {timeout} s"
        return answers[-1]

    try:
        first = answer_of(b"14 juillet 1989\n", 300)  # the model loads first
        second = answer_of(b"3 mai 2001\n", 60)
        assert first.endswith(b"\n") and second.endswith(b"\n")
        process.stdin.close()
        assert process.wait(timeout=60) == 0
        assert process.stdout.read() == b""
    finally:
        process.kill()
        process.wait()


@pytest.fixture(scope="module")
def test_split_translations(trained_run):
    """The run's test sources and their translations by an uninterrupted
    ``translate --input`` (for both signals' tests; in this process: the
    translations are the reference, the signals' processes are the tests)."""
    root, _ = trained_run
    sources = [s for s, _ in text.read_pairs(root / "run" / "splits" / "test.tsv")]
    small = root / "sources.txt"
    small.write_text("".join(f"{s}\n" for s in sources))
    argv = ["translate", "--model", str(root / "run"), "--input", str(small)]
    reference = run_in_process(argv)
    assert reference.status == 0, reference.stderr[-3000:]
    expected = reference.stdout.split("\n")[:-1]
    assert len(expected) == len(sources)
    return sources, expected


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_translate_stopped_mid_input_keeps_whole_lines(
    trained_run, test_split_translations, signum
):
    """Ctrl-C or SIGTERM in the middle of ``--input`` to ``--output``: exit 130 or
    143, the output holds N whole translations in input order, and the one stderr
    line says N."""
    root, _ = trained_run
    sources, expected = test_split_translations
    big = root / f"big-{signum}.txt"
    big.write_text("".join(f"{s}\n" for s in sources) * 4000)
    out = root / f"out-{signum}.txt"
    process = _translate_process(
        root / "run", "--input", big, "--output", out, stderr=subprocess.PIPE
    )
    deadline = time.monotonic() + 300
    while not (out.exists() and out.stat().st_size):
        assert process.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    process.send_signal(signum)
    _, err = ended_within(process, 60)
    assert process.returncode == 128 + signum
    lines = out.read_bytes().decode().split("\n")
    assert lines.pop() == ""  # every line whole
    assert 0 < len(lines) < 4000 * len(sources)
    assert lines == [expected[i % len(sources)] for i in range(len(lines))]
    assert err.decode() == (
        f"keras-selfattn: interrupted: {len(lines)} lines written to {out}\n"
    )


def _opened_for_writing(fifo, process, timeout=300):
    """The write end of ``fifo``, once ``process`` opens it to read."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:  # ENXIO: no reader yet
            assert process.poll() is None, process.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "evaluate never read its --data"
            time.sleep(0.05)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_evaluate_stopped_while_reading_its_pairs(trained_run, tmp_path, signum):
    """Ctrl-C, SIGTERM or SIGHUP while evaluate reads its --data (a pipe that
    stays open, read a batch at a time): exit 130, 143 or 129, one line, nothing
    on stdout."""
    root, _ = trained_run
    fifo = tmp_path / "pairs.tsv"
    os.mkfifo(fifo)
    process = forked_commands.command(
        ["evaluate", "--model", str(root / "run"), "--data", str(fifo), "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**user_env(), **WHERE_IT_HANGS},
    )
    try:
        writer = _opened_for_writing(fifo, process)  # the model is loaded by now
        os.write(writer, b"14 juillet 1989\t1989-07-14\n" * 300)  # a batch and more
        time.sleep(0.5)
        process.send_signal(signum)
        out, err = ended_within(process, 60)
        os.close(writer)
    finally:
        process.kill()
        process.wait()
    by = "" if signum == signal.SIGINT else f" by {signal.Signals(signum).name}"
    assert (process.returncode, err.decode(), out) == (
        128 + signum,
        f"keras-selfattn: interrupted{by}\n",
        b"",
    )
