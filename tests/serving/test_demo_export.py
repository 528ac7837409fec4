"""The end of `keras-selfattn demo`: export, check-serving, and the docker run / curl
lines."""

import shutil

import pytest

from keras_selfattn import jobs, text, training
from keras_selfattn.inference import load_translator
from keras_selfattn.training import TrainConfig, TrainResult
from tests.serving.tiny_runs import TINY_MODEL

# One xdist worker runs every serving test, so the session fixtures train once.
pytestmark = pytest.mark.slow


def test_demo_ends_with_a_checked_export_and_the_commands(
    text_run_dir, tmp_path, monkeypatch, capsys
):
    run_dir = shutil.copytree(text_run_dir, tmp_path / "demo")

    def trained_already(
        data, out_dir, model_config, train_config, *, on_finished=None, **options
    ):
        # Stands in for the demo's long training run: the session's tiny trained run.
        translator = load_translator(run_dir)
        result = TrainResult(
            run_dir=run_dir,
            model=translator.model,
            tokenizer=translator.tokenizer,
            model_config=TINY_MODEL,
            train_config=TrainConfig(),
            history={"loss": [1.0], "val_loss": [1.0]},
            test_pairs=text.read_pairs(run_dir / "splits" / "test.tsv"),
        )
        if on_finished is not None:  # as train does before it marks the run finished
            on_finished(result)
        return result

    monkeypatch.setattr(training, "train", trained_already)
    jobs.run_demo(str(run_dir), verbose=0, figures=False)
    out = capsys.readouterr().out
    base = (run_dir / jobs.EXPORT_DIR / "translator").resolve()
    assert (base / "1" / "saved_model.pb").is_file()
    assert "check-serving: OK" in out
    assert (
        "docker run -p 8500:8500 -p 8501:8501 --mount "
        f"type=bind,source={base},target=/models/translator "
        "-e MODEL_NAME=translator -t tensorflow/serving"
    ) in out
    assert (
        "curl -s -X POST http://localhost:8501/v1/models/translator:predict -H "
        "'Content-Type: application/json'" in out
    )
