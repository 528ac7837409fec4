"""TensorBoard: train's event files read back (tags, steps, values), and the switch."""

import csv
import pathlib
import types

import numpy as np
import pytest
import tensorflow as tf

from keras_selfattn.run_directory.layout import HISTORY_FILE, TENSORBOARD_DIR
from keras_selfattn.training.callbacks.tensorboard import attention_image
from keras_selfattn.training.fit import fit_callbacks
from keras_selfattn.training.fit.step_plan import plan_steps
from tests.training import reference_run
from tests.training.reference_run import tiny_train_config


def _events(log_dir):
    """``{tag: [(step, value)]}`` of every event file under ``log_dir``."""
    from tensorboard.backend.event_processing.event_accumulator import (
        EventAccumulator,
    )

    accumulator = EventAccumulator(str(log_dir), size_guidance={"tensors": 0})
    accumulator.Reload()
    return {
        tag: [
            (event.step, tf.make_ndarray(event.tensor_proto))
            for event in accumulator.Tensors(tag)
        ]
        for tag in accumulator.Tags()["tensors"]
    }


@pytest.mark.slow
def test_train_writes_the_summaries_a_user_opens(tmp_path_factory):
    """The shared 12-step run (`reference_run.twelve_steps`: validated every 4
    steps, logged every 3) read back from its event files."""
    pytest.importorskip("tensorboard")
    config = tiny_train_config()
    assert (config.train_steps, config.eval_every, config.log_every) == (12, 4, 3)
    result = reference_run.twelve_steps(
        tmp_path_factory, reference_run.pairs_file(tmp_path_factory)
    )
    events = _events(result.run_dir / TENSORBOARD_DIR)

    assert [step for step, _ in events["train/loss"]] == [3, 4, 6, 8, 9, 12]
    assert all(np.isfinite(value) for _, value in events["train/loss"])
    rates = [float(value) for _, value in events["train/learning_rate"]]
    assert all(0 < rate <= config.learning_rate * (1 + 1e-6) for rate in rates), rates
    # the stream's counters run ahead of the steps (prefetch): an interval may
    # show no new tokens, never fewer
    speeds = [float(v) for _, v in events["train/target_tokens_per_second"]]
    assert speeds and min(speeds) >= 0 and max(speeds) > 0
    with open(result.run_dir / HISTORY_FILE, newline="", encoding="utf-8") as f:
        rows = [row for row in csv.DictReader(f) if row["val_loss"] != "nan"]
    for name in ("loss", "chrf", "bleu", "distinct", "source_dependence"):
        logged = events[f"validation/{name}"]
        assert [step for step, _ in logged] == [4, 8, 12]
        expected = [float(row[f"val_{name}"]) for row in rows]
        np.testing.assert_allclose([float(v) for _, v in logged], expected, rtol=1e-5)
    assert float(events["health/ok"][-1][1]) == float(result.summary["health"]["ok"])
    examples = events["validation/examples"][-1][1].item().decode()
    assert examples.strip().startswith(rows[-1]["val_example_1"].split(" => ")[0])
    image = events["validation/attention"][-1][1]  # width, height, PNG bytes
    assert int(image[0]) > 0 and int(image[1]) > 0 and image[2][:4] == b"\x89PNG"


def _tensorboard_log(tensorboard=True, verbose=2):
    """`fit_callbacks.tensorboard_log` on a chief that prints at ``verbose``."""
    config = tiny_train_config(tensorboard=tensorboard)
    place = types.SimpleNamespace(
        role=types.SimpleNamespace(is_chief=True),
        verbose=verbose,
        work_dir=pathlib.Path("run"),
    )
    return fit_callbacks.tensorboard_log(
        config, place, plan_steps(config, None), step=0, speed=None, validation=None
    )


def test_no_tensorboard_package_is_one_info_line(monkeypatch, capsys):
    monkeypatch.setattr(fit_callbacks, "tensorboard_installed", lambda: False)
    assert _tensorboard_log() == []
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        (
            "TensorBoard logs off: the tensorboard package is not installed "
            "(pip install keras-selfattn[tensorboard])"
        )
    ]
    assert _tensorboard_log(verbose=0) == []
    assert capsys.readouterr().out == ""


def test_no_tensorboard_writes_nothing_and_says_nothing(monkeypatch, capsys):
    monkeypatch.setattr(fit_callbacks, "tensorboard_installed", lambda: True)
    assert _tensorboard_log(tensorboard=False) == []
    assert capsys.readouterr().out == ""
    (log,) = _tensorboard_log()
    assert log.every == tiny_train_config().log_every == 3 and log.step == 0


def test_the_attention_image_is_the_weights_in_squares():
    weights = np.array([[1.0, 0.0], [0.25, 0.75]])
    image = attention_image(weights)
    assert image.shape == (1, 16, 16, 1)
    np.testing.assert_array_equal(image[0, ::8, ::8, 0], weights)
    assert image.min() >= 0 and image.max() <= 1
