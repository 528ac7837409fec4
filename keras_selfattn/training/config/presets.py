"""Named recipes for real text: every setting of a model and its training, in one place.

``keras-selfattn train --preset small`` (or ``preset_configs("small")``) starts from
these values; flags given after it override them one by one. The figures each
preset reaches on Multi30k English->German are in the README ("Training on real
text") and benchmarks/RESULTS.md, with the commands that produced them.

- ``small``: a CPU recipe (minutes to an hour on a laptop's cores): a 3-block
  pre-layer-norm encoder, 256 wide, and a one-layer GRU decoder with the
  attentional output; inverse-square-root learning rate; label smoothing 0.1.
- ``base``: a GPU-day recipe for corpora of 1M-10M pairs: a 6-block encoder 512
  wide, a two-layer residual, layer-normalized LSTM decoder with the attentional
  output, token-budget batches.

Both use pre-layer-norm encoder blocks: post-layer-norm blocks at a learning rate
of 2e-3 with a short warm-up collapsed on Multi30k (the encoder output became the
same for every source; benchmarks/RESULTS.md "Real language").
"""

from keras_selfattn.models.config import ModelConfig
from keras_selfattn.training.config import TrainConfig

__all__ = ["PRESETS", "preset_configs"]

PRESETS = {
    "small": {
        "model": {
            "num_hiddens": 256,
            "num_heads": 4,
            "num_layers": 3,
            "ffn_hiddens": 1024,
            "dropout": 0.1,
            "norm_first": True,
            "decoder_units": 256,
            "decoder_layers": 1,
            "rnn_type": "gru",
            "attention_score": "additive",
            "embedding_dim": 256,
            "attentional_output": True,
            "decoder_residual": True,
            "decoder_layer_norm": True,
            "max_source_len": 100,
            "max_target_len": 100,
            "position": "sinusoidal",
        },
        "train": {
            "batch_size": 64,
            "learning_rate": 1e-3,
            "warmup_steps": 800,
            "lr_schedule": "inverse_sqrt",
            "clipnorm": 1.0,
            "label_smoothing": 0.1,
            "source_tokenizer": "subword",
            "target_tokenizer": "subword",
            "epochs": 15,
            "patience": 4,
            "best_by": "chrf",
            "validation_translations": 500,
        },
    },
    "base": {
        "model": {
            "num_hiddens": 512,
            "num_heads": 8,
            "num_layers": 6,
            "ffn_hiddens": 2048,
            "dropout": 0.1,
            "norm_first": True,
            "decoder_units": 512,
            "decoder_layers": 2,
            "rnn_type": "lstm",
            "attention_score": "additive",
            "embedding_dim": 512,
            "attentional_output": True,
            "decoder_residual": True,
            "decoder_layer_norm": True,
            "max_source_len": 128,
            "max_target_len": 128,
            "position": "sinusoidal",
        },
        "train": {
            "batch_size": 128,
            "batch_tokens": 8192,
            "learning_rate": 7e-4,
            "warmup_steps": 4000,
            "lr_schedule": "inverse_sqrt",
            "clipnorm": 1.0,
            "label_smoothing": 0.1,
            "source_tokenizer": "subword",
            "target_tokenizer": "subword",
            "epochs": 40,
            "patience": 6,
            "best_by": "chrf",
            "validation_translations": 1000,
            "mixed_precision": "mixed_bfloat16",
        },
    },
}


def preset_configs(name):
    """The `ModelConfig` and `TrainConfig` of preset ``name``.

    Args:
        name: a key of `PRESETS` (``"small"`` or ``"base"``).

    Returns:
        ``(ModelConfig, TrainConfig)``; every field the preset does not name
        keeps its default.

    Example:

    >>> model_config, train_config = preset_configs("small")
    >>> model_config.norm_first, train_config.lr_schedule
    (True, 'inverse_sqrt')
    """
    if name not in PRESETS:
        raise ValueError(
            f"preset must be one of {sorted(PRESETS)}. Received: preset={name!r}"
        )
    preset = PRESETS[name]
    return ModelConfig(**preset["model"]), TrainConfig(**preset["train"])
