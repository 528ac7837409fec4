"""Every example runs: one short step each (the smoke test the examples promise)."""

import importlib.util
import pathlib

import pytest

from keras_selfattn.text import load_bundled_dates
from tests.training import reference_run

pytestmark = pytest.mark.slow
EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples"


def load(name):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_layers_in_your_model():
    history = load("layers_in_your_model").main(
        ["--epochs", "1", "--steps-per-epoch", "2"]
    )
    assert len(history.history["loss"]) == 1


def test_train_on_tsv(tmp_path):
    from keras_selfattn.text import write_pairs

    data = write_pairs(tmp_path / "pairs.tsv", load_bundled_dates()[:300])
    metrics = load("train_on_tsv").main(
        ["--data", str(data), "--epochs", "1", "--steps-per-epoch", "2"]
    )
    assert 0.0 <= metrics["exact_match"] <= 1.0


def test_translate_and_plot(tmp_path, tmp_path_factory):
    # Any finished run will do (the example's subject is translating and
    # plotting): the tiny run tests/training shares, trained once per test run.
    run = reference_run.twelve_steps(
        tmp_path_factory, reference_run.pairs_file(tmp_path_factory)
    ).run_dir
    beams = load("translate_and_plot").main(
        [
            "--model",
            str(run),
            "--out",
            str(tmp_path / "png"),
            "--beam",
            "2",
            "14 juillet 1989",
        ]
    )
    assert len(beams) == 1
    assert (tmp_path / "png" / "attention_0.png").read_bytes()[:4] == b"\x89PNG"
