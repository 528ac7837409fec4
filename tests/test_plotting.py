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
