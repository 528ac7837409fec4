import warnings

import numpy as np
import pytest
from PIL import Image

from keras_selfattn import plotting


def test_positional_encoding_figure(tmp_path):
    path = plotting.plot_positional_encoding(tmp_path / "sub" / "pe.png")
    image = Image.open(path)
    assert image.format == "PNG" and image.size[0] > 600
    with pytest.raises(ValueError, match="column=40, num_hiddens=32"):
        plotting.plot_positional_encoding(tmp_path / "x.png", columns=(6, 40))


def test_attention_heatmap_and_its_shape_check(tmp_path):
    weights = np.full((3, 4), 0.25)
    path = plotting.plot_attention(
        weights, ["a", "b", "c", "d"], ["x", "y", "</s>"], tmp_path / "a.png", title="t"
    )
    pixels = np.asarray(Image.open(path).convert("RGB"))
    assert pixels.std() > 0  # something was drawn
    with pytest.raises(
        ValueError, match=r"weights.shape=\(3, 4\), 2 target tokens, 4 source tokens"
    ):
        plotting.plot_attention(
            weights, ["a", "b", "c", "d"], ["x", "y"], tmp_path / "b.png"
        )


def test_history_figure(tmp_path):
    path = plotting.plot_history(
        {"loss": [1.0, 0.5], "val_loss": [1.1, 0.6], "accuracy": [0.2, 0.9]},
        tmp_path / "h.png",
    )
    assert Image.open(path).format == "PNG"


def _drawn(monkeypatch, history, tmp_path):
    """The x label and each line's points of the loss panel of `plot_history`."""
    seen = {}
    save = plotting._save

    def keep(figure, path, plt):
        axis = figure.axes[0]
        seen["xlabel"] = axis.get_xlabel()
        seen["lines"] = {
            line.get_label(): (list(line.get_xdata()), list(line.get_ydata()))
            for line in axis.get_lines()
        }
        return save(figure, path, plt)

    monkeypatch.setattr(plotting, "_save", keep)
    assert (
        Image.open(plotting.plot_history(history, tmp_path / "h.png")).format == "PNG"
    )
    return seen


def test_the_history_figure_is_keyed_by_step(tmp_path, monkeypatch):
    nan = float("nan")
    history = {  # history.csv's columns: validation every other period
        "step": [50.0, 100.0, 150.0, 200.0],
        "epoch": [0.0, 1.0, 2.0, 3.0],
        "loss": [3.0, 2.0, 1.5, 1.2],
        "val_loss": [nan, 2.5, nan, 1.9],
    }
    seen = _drawn(monkeypatch, history, tmp_path)
    assert seen["xlabel"] == "step"
    assert seen["lines"]["loss"] == (history["step"], history["loss"])
    assert seen["lines"]["val_loss"] == ([100.0, 200.0], [2.5, 1.9])  # NaN left out
    # Keras' own History (no steps): by period, labelled epoch.
    seen = _drawn(monkeypatch, {"loss": [2.0, 1.0]}, tmp_path)
    assert seen["xlabel"] == "epoch"
    assert seen["lines"]["loss"] == ([1, 2], [2.0, 1.0])


def test_no_font_or_legend_warnings(tmp_path):
    from keras_selfattn.text.tokenizers import JOINER

    assert plotting._JOINER == JOINER
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a missing glyph or empty legend would raise
        plotting.plot_attention(
            np.full((2, 3), 1 / 3),
            ["14", f"{JOINER}.", "mai"],
            ["3", f"{JOINER}4"],
            tmp_path / "a.png",
        )
        plotting.plot_history({"loss": [2.0, 1.0]}, tmp_path / "h.png")
    assert plotting._shown(f"{JOINER},") == "\u25aa,"
