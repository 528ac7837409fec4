"""The keras-selfattn command end to end, in subprocesses, as a user runs it."""

import json
import os
import pathlib
import subprocess
import sys

import pytest

from keras_selfattn import text

# One xdist worker runs the whole module, so the trained-run fixture is built once.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("cli")]
REPO = pathlib.Path(__file__).resolve().parents[1]
TINY = [
    "--num-hiddens",
    "16",
    "--num-heads",
    "2",
    "--num-layers",
    "1",
    "--ffn-hiddens",
    "32",
    "--decoder-units",
    "32",
    "--embedding-dim",
    "8",
    "--max-target-len",
    "12",
    "--target-tokenizer",
    "char",
    "--warmup-steps",
    "5",
    "--batch-size",
    "32",
]


def cli(*args, stdin=None, check=True):
    env = dict(os.environ, PYTHONPATH=str(REPO), TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run(
        [sys.executable, "-m", "keras_selfattn", *map(str, args)],
        input=stdin,
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    if check:
        assert result.returncode == 0, result.stderr[-3000:]
    return result


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli")
    data = text.write_pairs(root / "pairs.tsv", text.load_bundled_dates()[:300])
    result = cli("train", "--data", data, "--out", root / "run", "--epochs", "2", *TINY)
    return root, result


def test_train_writes_a_run_and_reports(trained_run):
    root, result = trained_run
    assert "evaluated: the run's test split (" in result.stdout
    assert "exact match" in result.stdout and "held-out" not in result.stdout
    assert "Epoch 1/2" in result.stdout  # Keras' progress output
    run = root / "run"
    metrics = json.loads((run / "metrics.json").read_text())
    assert {"bleu", "chrf", "exact_match"} <= set(metrics["test"])
    for name in ("positional_encoding.png", "history.png", "attention_0.png"):
        png = run / "plots" / name
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name


def test_evaluate_and_translate(trained_run):
    root, _ = trained_run
    run = root / "run"
    result = cli("evaluate", "--model", run, "--beam", "2")
    scores = json.loads(result.stdout.strip().splitlines()[-1])
    assert scores["count"] > 0 and 0 <= scores["exact_match"] <= 1
    test_split = run / "splits" / "test.tsv"
    assert result.stdout.startswith(
        f"evaluated: the run's test split ({test_split}): {scores['count']} pairs, "
        "beam 2 search\n"
    )
    # --data FILE: the whole file is scored, and the report says which and how much.
    given = text.write_pairs(root / "some.tsv", text.read_pairs(test_split)[:7])
    result = cli("evaluate", "--model", run, "--data", given)
    assert result.stdout.startswith(f"evaluated: {given}: 7 pairs, greedy search\n")
    assert json.loads(result.stdout.strip().splitlines()[-1])["data"] == str(given)
    translated = cli(
        "translate", "--model", run, "--scores", "14 juillet 1989", "", "zzz qqq"
    )
    lines = translated.stdout.split("\n")
    assert len(lines) == 4 and lines[3] == ""  # three inputs, three lines
    _text_part, score = lines[0].split("\t")
    assert float(score) <= 0.0
    assert lines[1] == "\t0.0000"  # empty input: empty translation
    long = cli("translate", "--model", run, "word " * 200)
    assert "truncated to" in long.stderr
    piped = cli("translate", "--model", run, stdin="14 juillet 1989\n3 mai 2001\n")
    assert len(piped.stdout.strip().split("\n")) == 2
    env = dict(os.environ, PYTHONPATH=str(REPO), TF_CPP_MIN_LOG_LEVEL="3")
    not_utf8 = subprocess.run(
        [sys.executable, "-m", "keras_selfattn", "translate", "--model", str(run)],
        input=b"14 juillet \xff\xfe1989\n",
        check=False,
        capture_output=True,
        env=env,
        timeout=600,
    )
    assert not_utf8.returncode == 0 and b"Traceback" not in not_utf8.stderr
    assert len(not_utf8.stdout.decode().strip().split("\n")) == 1


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["translate", "--model", "/nonexistent/run", "x"],
            "Run directory not found: /nonexistent/run",
        ),
        (["evaluate", "--model", "/nonexistent/run"], "Run directory not found"),
    ],
)
def test_errors_are_one_line_without_traceback(args, message):
    result = cli(*args, check=False)
    assert result.returncode == 2
    assert message in result.stderr and "Traceback" not in result.stderr


def test_malformed_and_empty_tsv(tmp_path):
    bad = tmp_path / "bad.tsv"
    bad.write_text("un\tone\ndeux sans tabulation\n")
    result = cli("train", "--data", bad, "--out", tmp_path / "run", check=False)
    assert (
        result.returncode == 2 and "bad.tsv" in result.stderr and "2" in result.stderr
    )
    assert "Traceback" not in result.stderr
    empty = tmp_path / "empty.tsv"
    empty.write_text("")
    result = cli("train", "--data", empty, "--out", tmp_path / "run", check=False)
    assert (
        result.returncode == 2
        and "empty.tsv" in result.stderr
        and "Traceback" not in result.stderr
    )


def test_text_options_accept_only_their_choices(capsys):
    """Every enumerated option lists its values and rejects others as a usage error (exit 2)."""
    from keras_selfattn.cli import build_parser
    from keras_selfattn.layers.bahdanau_attention import SCORES
    from keras_selfattn.layers.bahdanau_decoder import RNN_TYPES
    from keras_selfattn.models.config import ModelConfig
    from keras_selfattn.training.config import TrainConfig
    from keras_selfattn.training.strategy import STRATEGIES

    # The config's literal lists are the layers' and the strategies' own.
    assert ModelConfig.CHOICES["rnn_type"] == RNN_TYPES
    assert ModelConfig.CHOICES["attention_score"] == SCORES
    assert TrainConfig.CHOICES["strategy"] == STRATEGIES
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
