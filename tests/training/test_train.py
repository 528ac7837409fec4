"""train(): the run directory, training by steps, exact resume, its rules, bad input."""

import csv
import json
import os
import signal
import subprocess
import time

import keras
import numpy as np
import pytest

from keras_selfattn import text
from keras_selfattn.cli import build_parser
from keras_selfattn.cli.flags import config_from_args
from keras_selfattn.inference import evaluate, load_translator
from keras_selfattn.models import ModelConfig
from keras_selfattn.training import TrainConfig, load_run_config, train
from keras_selfattn.training.callbacks.best_model import save_model_atomically
from keras_selfattn.training.fit.train import TrainInterrupted
from keras_selfattn.training.resume.backup import backed_up_epochs
from keras_selfattn.training.resume.run_state import claim_run_dir
from tests import forked_commands
from tests.training import reference_run
from tests.training.cluster import REPO, subprocess_env
from tests.training.reference_run import TINY_MODEL, tiny_train_config

pytestmark = pytest.mark.slow

TINY_ARGS = [
    *[
        "--num-hiddens",
        "16",
        "--num-heads",
        "2",
        "--num-layers",
        "1",
        "--ffn-hiddens",
        "32",
    ],
    *["--decoder-units", "16", "--embedding-dim", "8", "--dropout", "0.2"],
    *["--max-source-len", "24", "--max-target-len", "12", "--batch-size", "16"],
    *[
        "--target-tokenizer",
        "char",
        "--warmup-steps",
        "5",
        "--seed",
        "3",
        "--no-jit-compile",
    ],
    *["--train-steps", "12", "--eval-every", "4", "--shuffle-buffer", "64"],
    *["--log-every", "3", "--validation-translations", "16"],  # tiny_train_config's
]
WORKER = REPO / "tests" / "training" / "train_worker.py"


def history_steps(run):
    """The first column of history.csv (its key, the step), header included (a CSV:
    its text columns hold spaces and commas)."""
    with open(run / "history.csv", newline="", encoding="utf-8") as handle:
        return [row[0] for row in csv.reader(handle)]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return reference_run.pairs_file(tmp_path_factory)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory, data):
    """The shared 12-step run (`reference_run.twelve_steps`) and the warnings its
    training gave."""
    reference = reference_run.twelve_steps(tmp_path_factory, data)
    return reference, reference.warnings


def weights(run):
    return keras.saving.load_model(run / "model.keras").get_weights()


def test_run_directory_holds_everything(uninterrupted):
    result, caught = uninterrupted
    run = result.run_dir
    for name in (
        "model.keras",
        "config.json",
        "data.json",
        "training.json",
        "source_vocab.txt",
        "target_vocab.txt",
        "tokenizer.json",
        "history.csv",
        "splits/validation.tsv",
        "splits/test.tsv",
    ):
        assert (run / name).exists(), name
    # Only the newest backup is kept once training finished (to continue the run).
    assert backed_up_epochs(run / "backup" / "worker-0") == [3]
    model_config, train_config = load_run_config(run / "config.json")
    assert model_config == TINY_MODEL and train_config == tiny_train_config()
    # 12 steps validated every 4: three rows, the loss going down.
    assert len(result.history["loss"]) == 3 and len(result.history["val_loss"]) == 3
    assert result.history["loss"][-1] < result.history["loss"][0]
    finished = json.loads((run / "training.json").read_text())
    assert finished["steps"] == 12 and finished["dropped_for_length"] == 0
    assert finished["pairs_read"] >= 12 * 16
    assert not [m for m in caught if "ran out of data" in m]
    # Held out by source fingerprint: no source in two splits, none in training.
    validation = text.read_pairs(run / "splits/validation.tsv")
    assert {s for s, _ in validation}.isdisjoint({s for s, _ in result.test_pairs})
    assert len(validation) == round(0.1 * 300) or abs(len(validation) - 30) <= 3
    translator = load_translator(run)
    metrics = evaluate(translator, result.test_pairs[:10])
    assert metrics["count"] == 10 and 0.0 <= metrics["exact_match"] <= 1.0


def test_a_finished_run_or_foreign_directory_is_refused(tmp_path, uninterrupted, data):
    result, _ = uninterrupted
    with pytest.raises(ValueError, match="holds a finished run.*--overwrite"):
        train(str(data), result.run_dir, TINY_MODEL, tiny_train_config(), verbose=0)
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "model.keras").write_bytes(b"the user's own model")
    with pytest.raises(ValueError, match="files that are not an interrupted run"):
        train(str(data), foreign, TINY_MODEL, tiny_train_config(), verbose=0)
    assert (foreign / "model.keras").read_bytes() == b"the user's own model"
    assert claim_run_dir(foreign, overwrite=True) == ("new", False)
    assert not list(foreign.iterdir())
    for empty in ("", "  "):
        with pytest.raises(ValueError, match="run_dir must name a directory"):
            train(str(data), empty, TINY_MODEL, tiny_train_config(), verbose=0)


class Crash(keras.callbacks.Callback):
    """Simulates a crash once fit is over, before the run is marked finished."""

    def on_train_end(self, logs=None):
        raise RuntimeError("simulated crash after fit")


def _interrupt(result):
    raise KeyboardInterrupt


def _killed_after_its_first_backup(tmp_path, data, run):
    """Runs the `train` of TINY_ARGS in a process (forked:
    `tests.forked_commands`) and SIGKILLs it once its first backup (step 4) is
    written."""
    args = [str(WORKER), "--data", str(data), "--out", str(run)]
    log = open(tmp_path / "killed.log", "wb")  # noqa: SIM115 (closed below)
    process = forked_commands.Popen(
        [*args, *TINY_ARGS], env=subprocess_env(), stdout=log, stderr=subprocess.STDOUT
    )
    first_backup = run / "backup" / "worker-0" / "epoch-00001.json"
    deadline = time.monotonic() + 300
    while not first_backup.exists() and process.poll() is None:
        assert time.monotonic() < deadline, (tmp_path / "killed.log").read_text()[
            -3000:
        ]
        time.sleep(0.05)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    log.close()
    assert first_backup.exists(), (tmp_path / "killed.log").read_text()[-3000:]
    assert not (run / "training.json").exists(), "finished before it could be killed"


def test_a_killed_then_interrupted_run_resumes_exactly(tmp_path, data, uninterrupted):
    """SIGKILL of a process after its first backup; then, in this process, a crash
    once fit is over but before the run is marked finished, then Ctrl-C in the
    final work (``on_finished``, where the command line writes the test metrics
    and the plots): each rerun trains only what was lost, and the call that
    finishes the run writes the ``training.json``, summary and weights of the
    unbroken run (its health, steps and counts, not those of the finishing call
    that trained nothing). The reruns run here: what they read is what the killed
    process left (a process's own start-up is not what this test is about)."""
    reference, _ = uninterrupted
    run = tmp_path / "run"
    config = tiny_train_config()
    # The killed process's command line asks for the configuration used here.
    args = build_parser().parse_args(["train", "--data", "d", "--out", "o", *TINY_ARGS])
    assert config_from_args(ModelConfig, args) == TINY_MODEL
    assert config_from_args(TrainConfig, args) == config
    _killed_after_its_first_backup(tmp_path, data, run)
    # Other data or another configuration: refused, naming what changed.
    other = text.write_pairs(tmp_path / "other.tsv", text.load_bundled_dates()[:310])
    with pytest.raises(
        ValueError, match=r"other data: --data file .*pairs.tsv became .*other.tsv"
    ):
        train(str(other), run, TINY_MODEL, config, verbose=0)
    with pytest.raises(ValueError, match="different configuration"):
        train(str(data), run, TINY_MODEL, tiny_train_config(train_steps=16), verbose=0)
    # Resumed, then crashed once fit is over but before the run is marked finished.
    with pytest.raises(RuntimeError, match="after fit"):
        train(str(data), run, TINY_MODEL, config, verbose=0, callbacks=[Crash()])
    # Ctrl-C in the final work: the steps are done, the run is not finished.
    with pytest.raises(TrainInterrupted, match="its 12 steps are done") as caught:
        train(str(data), run, TINY_MODEL, config, verbose=0, on_finished=_interrupt)
    assert "rerun the same command to finish the run" in caught.value.rerun
    assert not (run / "training.json").exists()
    result = train(str(data), run, TINY_MODEL, config, verbose=0)
    assert result.history.get("loss", []) == []  # nothing trained twice
    history = history_steps(run)
    assert history == ["step", "4", "8", "12"]  # every period once
    expected = json.loads((reference.run_dir / "training.json").read_text())
    assert expected["health"] is not None and expected["pairs_read"] > 0
    assert expected["steps"] == 12
    assert json.loads((run / "training.json").read_text()) == expected
    # The summary of the whole run, as the uninterrupted run wrote it.
    assert result.summary == reference.summary
    for got, expected in zip(weights(run), weights(reference.run_dir), strict=True):
        np.testing.assert_array_equal(got, expected)


def test_an_early_stopped_run_interrupted_in_its_final_work_is_finished_there(
    tmp_path, data
):
    """A run that stopped early (patience 1), then Ctrl-C in its final work: the
    same call trains no further period, and the run equals an unbroken one.

    The unbroken run is this run as its final work begins: ``on_finished`` gets
    the run's result and, after it, an unbroken run only writes training.json
    from that result's summary. (Two runs trained alike from one seed are
    test_a_killed_then_interrupted_run_resumes_exactly's.)"""
    config = tiny_train_config(train_steps=40, eval_every=2, patience=1)
    run = tmp_path / "run"
    unbroken = {}

    def interrupt_after_reading_the_run(result):
        unbroken.update(
            summary=result.summary, history=history_steps(run), weights=weights(run)
        )
        raise KeyboardInterrupt

    with pytest.raises(TrainInterrupted) as caught:
        train(
            str(data),
            run,
            TINY_MODEL,
            config,
            verbose=0,
            on_finished=interrupt_after_reading_the_run,
        )
    steps = unbroken["summary"]["steps"]
    assert steps < 40  # it stopped early
    caught.match(f"its {steps} steps are done")
    assert not (run / "training.json").exists()
    finished = train(str(data), run, TINY_MODEL, config, verbose=0)
    assert finished.history.get("loss", []) == []  # nothing trained again
    assert finished.summary == unbroken["summary"]
    assert json.loads((run / "training.json").read_text())["steps"] == steps
    assert history_steps(run) == unbroken["history"]
    for got, expected in zip(weights(run), unbroken["weights"], strict=True):
        np.testing.assert_array_equal(got, expected)


def test_bad_input_leaves_no_run_directory(tmp_path, data):
    bad = tmp_path / "bad.tsv"
    bad.write_text("a\tb\nno tab\n")
    with pytest.raises(ValueError, match=r"bad\.tsv:2: no tab character"):
        train(str(bad), tmp_path / "run1", TINY_MODEL, tiny_train_config(), verbose=0)
    assert not (tmp_path / "run1").exists()
    empty = tmp_path / "empty.tsv"
    empty.write_text("")
    with pytest.raises(ValueError, match=r"empty\.tsv: the file is empty"):
        train(str(empty), tmp_path / "run2", TINY_MODEL, tiny_train_config(), verbose=0)
    with pytest.raises(FileNotFoundError, match=r"nothing\*"):
        train(str(tmp_path / "nothing*"), tmp_path / "r", TINY_MODEL, verbose=0)
    assert not (tmp_path / "run2").exists() and not (tmp_path / "r").exists()
    short = ModelConfig(**{**TINY_MODEL.__dict__, "max_source_len": 1})
    with pytest.raises(ValueError, match=r"No training pair fits.*240 of 240 pairs"):
        train(str(data), tmp_path / "run3", short, tiny_train_config(), verbose=0)
    assert not (tmp_path / "run3").exists()
    with pytest.raises(ValueError, match="train_steps"):
        TrainConfig(train_steps=0)
    with pytest.raises(ValueError, match="mixed_precision"):
        TrainConfig(mixed_precision="float8")


def test_the_best_model_is_replaced_atomically(tmp_path):
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    path = save_model_atomically(model, tmp_path / "model.keras")
    before = path.read_bytes()

    def killed_mid_write(target, *args, **kwargs):
        with open(target, "wb") as handle:
            handle.write(before[: len(before) // 2])
        raise KeyboardInterrupt("killed while writing")

    model.save = killed_mid_write
    with pytest.raises(KeyboardInterrupt):
        save_model_atomically(model, path)
    assert path.read_bytes() == before  # the previous best is whole
    keras.saving.load_model(path)
