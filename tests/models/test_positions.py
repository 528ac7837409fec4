"""build_seq2seq(position=...): sinusoidal, learned, relative and rotary encoders."""

import dataclasses

import keras
import numpy as np
import pytest

from keras_selfattn.layers import LearnedPositionalEncoding, PositionalEncoding
from keras_selfattn.models import ModelConfig, build_seq2seq
from tests.models import test_seq2seq
from tests.models.test_seq2seq import SOURCE, TARGET_IN

TINY = {**test_seq2seq.TINY, "dropout": 0.0, "max_relative_position": 3}


def predict(model, source=SOURCE, target_in=TARGET_IN):
    return model.predict({"source": source, "target_in": target_in}, verbose=0)


@pytest.mark.parametrize("norm_first", [False, True], ids=["post_norm", "pre_norm"])
@pytest.mark.parametrize(
    "position", ["learned", "relative", "rotary"]
)  # sinusoidal: test_seq2seq.py
def test_padding_changes_nothing_and_reordering_does(position, norm_first):
    model = build_seq2seq(20, 10, position=position, norm_first=norm_first, **TINY)
    base = predict(model)
    padded = predict(model, np.pad(SOURCE, ((0, 0), (0, 5))))
    np.testing.assert_allclose(padded, base, atol=1e-5)
    # Swap two source tokens: the (order-aware) encoder changes what the decoder sees.
    # The bridge is a mean over positions, so without positions the swap could not show.
    reordered = SOURCE.copy()
    reordered[0, :5] = reordered[0, [4, 3, 2, 1, 0]]
    assert not np.allclose(predict(model, reordered)[0], base[0], atol=1e-4)


def test_each_choice_builds_the_layers_it_names():
    def layer_types(position):
        model = build_seq2seq(20, 10, position=position, **TINY)
        return model, {type(layer) for layer in model.layers}

    model, types = layer_types("sinusoidal")
    assert PositionalEncoding in types and LearnedPositionalEncoding not in types
    model, types = layer_types("learned")
    assert LearnedPositionalEncoding in types and PositionalEncoding not in types
    assert model.get_layer("positional_encoding").P.shape == (1, 64, 16)
    for position in ("relative", "rotary"):
        model, types = layer_types(position)
        assert not types & {PositionalEncoding, LearnedPositionalEncoding}
        attention = model.get_layer("encoder_block_0").attention
        if position == "relative":
            assert attention.max_relative_position == 3
            assert tuple(attention.relative_key.shape) == (7, 8)
        else:
            assert attention.use_rotary


@pytest.mark.parametrize("position", ["learned", "relative", "rotary"])
def test_keras_round_trip_gives_identical_outputs(tmp_path, position):
    model = build_seq2seq(20, 10, position=position, **{**TINY, "dropout": 0.1})
    path = tmp_path / "model.keras"
    model.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True)
    np.testing.assert_array_equal(predict(loaded), predict(model))


def test_config_validates_and_old_configs_default_to_sinusoidal():
    with pytest.raises(ValueError, match="position=.absolute."):
        ModelConfig(position="absolute")
    with pytest.raises(ValueError, match="max_relative_position=0"):
        ModelConfig(max_relative_position=0)
    with pytest.raises(ValueError, match="position=.alibi."):
        build_seq2seq(20, 10, position="alibi")
    old = dataclasses.asdict(ModelConfig())
    del old["position"], old["max_relative_position"]
    config = ModelConfig.from_dict(old)
    assert config.position == "sinusoidal" and config.max_relative_position == 16
    assert (
        ModelConfig.from_dict(
            dataclasses.asdict(ModelConfig(position="rotary"))
        ).position
        == "rotary"
    )
