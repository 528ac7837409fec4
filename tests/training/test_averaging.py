"""Checkpoint averaging: the mean of the weights (NumPy), kept checkpoints, the CLI."""

import keras
import numpy as np
import pytest

from keras_selfattn import text
from keras_selfattn.models import build_seq2seq
from keras_selfattn.run_directory.layout import REPLACED_MODEL_FILE
from keras_selfattn.training.checkpoint_averaging import (
    average_checkpoints,
    average_run,
    kept_checkpoints,
)
from keras_selfattn.training.resume.run_lock import RunDirBusy
from tests.bad_input_cases import run_in_process
from tests.models import test_seq2seq
from tests.test_cli_watch import TINY_MODEL

TINY = {**test_seq2seq.TINY, "num_layers": 1}


def saved_models(directory, count, **overrides):
    """``count`` models of one architecture with different weights, saved."""
    paths, weights = [], []
    for i in range(count):
        model = build_seq2seq(20, 10, seed=i, **{**TINY, **overrides})
        rng = np.random.default_rng(i)
        model.set_weights([rng.normal(size=w.shape) for w in model.get_weights()])
        path = directory / f"step-{(i + 1) * 10:08d}.keras"
        model.save(path)
        paths.append(path)
        weights.append(model.get_weights())
    return paths, weights


def test_the_average_is_the_mean_of_every_weight(tmp_path):
    paths, weights = saved_models(tmp_path, 3)
    out = average_checkpoints(paths, tmp_path / "avg.keras")

    averaged = keras.saving.load_model(out, compile=False).get_weights()
    expected = [np.mean(ws, axis=0) for ws in zip(*weights)]
    assert len(averaged) == len(expected)
    for got, want in zip(averaged, expected):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_other_architectures_and_single_files_are_refused(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    paths, _ = saved_models(tmp_path / "a", 1)
    other, _ = saved_models(tmp_path / "b", 1, decoder_units=32, embedding_dim=8)
    with pytest.raises(ValueError, match=r"is not the architecture of .*step-0+10"):
        average_checkpoints([paths[0], other[0]], tmp_path / "avg.keras")
    assert not (tmp_path / "avg.keras").exists()
    with pytest.raises(ValueError, match=r"at least two model files"):
        average_checkpoints(paths, tmp_path / "avg.keras")
    (tmp_path / "junk.keras").write_bytes(b"not a zip")
    with pytest.raises(ValueError, match=r"junk.keras: damaged \(not a .keras archive"):
        average_checkpoints([paths[0], tmp_path / "junk.keras"], tmp_path / "x.keras")


def test_average_run_replaces_model_keras_and_keeps_the_old_one(tmp_path):
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    paths, weights = saved_models(run / "checkpoints", 3)
    (run / "model.keras").write_bytes(paths[0].read_bytes())
    (run / "checkpoints" / "step-latest.keras").write_bytes(b"")  # not ours: ignored
    assert kept_checkpoints(run) == paths
    with pytest.raises(ValueError, match=r"last must be an integer >= 2"):
        average_run(run, last=1)
    path, averaged = average_run(run, last=2)
    assert path == run / "model.keras" and averaged == paths[1:]
    assert (run / REPLACED_MODEL_FILE).read_bytes() == paths[0].read_bytes()

    got = keras.saving.load_model(path, compile=False).get_weights()
    np.testing.assert_allclose(got[0], (weights[1][0] + weights[2][0]) / 2, atol=1e-6)
    # A second average replaces the first one, never the trained model.
    average_run(run)
    assert (run / REPLACED_MODEL_FILE).read_bytes() == paths[0].read_bytes()
    got = keras.saving.load_model(path, compile=False).get_weights()
    np.testing.assert_allclose(got[0], np.mean([w[0] for w in weights], 0), atol=1e-6)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(
        ValueError, match=r"holds 0 checkpoint\(s\).*--keep-checkpoints"
    ):
        average_run(empty)


def test_average_run_is_refused_while_another_process_holds_the_run(tmp_path):
    """A process holding the run's lock as `train` does: the average is refused
    naming it, and model.keras stays the model it was."""
    from tests.bad_input_cases import Workspace, _lock_held

    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    paths, _ = saved_models(run / "checkpoints", 2)
    (run / "model.keras").write_bytes(paths[0].read_bytes())
    workspace = Workspace(tmp_path)
    _lock_held(workspace, run)
    try:
        with pytest.raises(
            RunDirBusy, match=r"in use by another train \(host .*process"
        ):
            average_run(run)
    finally:
        for cleanup in workspace.cleanups:
            cleanup()
    assert (run / "model.keras").read_bytes() == paths[0].read_bytes()
    assert not (run / REPLACED_MODEL_FILE).exists()
    average_run(run)  # the holder is gone: the average is written
    assert (run / REPLACED_MODEL_FILE).read_bytes() == paths[0].read_bytes()


@pytest.mark.slow
def test_train_keeps_the_newest_checkpoints_and_average_uses_them(tmp_path):
    pairs = text.load_bundled_dates()
    data = text.write_pairs(tmp_path / "train.tsv", pairs[:200])
    valid = text.write_pairs(tmp_path / "valid.tsv", pairs[200:220])
    run = tmp_path / "run"
    # train, average and evaluate in this process (tests/test_cli.py runs train
    # and evaluate as commands; the filter of TensorFlow's log lines, the one step
    # of `main` before every command, is tests/test_quiet_tensorflow.py's).
    trained = run_in_process(
        [
            "train",
            *("--data", str(data), "--valid-data", str(valid), "--out", str(run)),
            *TINY_MODEL,
            *("--train-steps", "8", "--eval-every", "2", "--keep-checkpoints", "3"),
            *("--validation-translations", "0", "--best-by", "loss"),
            "--no-figures",
        ]
    )
    assert trained.status == 0, trained.stderr[-3000:]
    names = [path.name for path in kept_checkpoints(run)]
    assert names == [
        "step-00000004.keras",
        "step-00000006.keras",
        "step-00000008.keras",
    ]
    result = run_in_process(["average", "--model", str(run), "--last", "2"])
    assert result.status == 0, result.stderr[-3000:]
    assert "the average of 2 checkpoints (steps 6, 8)" in result.stdout
    assert (run / REPLACED_MODEL_FILE).exists()
    result = run_in_process(
        ["evaluate", "--model", str(run), "--data", str(valid), "--json"]
    )
    assert result.status == 0, result.stderr[-3000:]
    assert '"bleu"' in result.stdout
    # An argument error.
    bad = run_in_process(["average", "--model", str(run), "--last", "1"])
    assert bad.status == 2 and "--last: must be an integer >= 2" in bad.stderr
