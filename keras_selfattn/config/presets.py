"""Named recipes for real text: how a model and its training differ from the defaults.

``keras-selfattn train --preset small`` (or ``preset_configs("small")``) starts from
these values; flags given after it override them one by one. A preset states
only what differs from the `ModelConfig` and `TrainConfig` defaults (a field it
does not name keeps its default, shown by ``preset_configs``);
tests/training/test_presets.py fails on a value equal to its default or a key
that is no field. So a changed default changes the presets too: re-measure them.
The figures each preset reaches on Multi30k English->German are in the README
("Training on real text") and benchmarks/RESULTS.md, with the commands that
produced them.

- ``small``: a CPU recipe (minutes to an hour on a laptop's cores): a 3-block
  pre-layer-norm encoder, 256 wide, and a one-layer GRU decoder with the
  attentional output and a deep output 1024 wide (on Multi30k it learns faster
  for a little more CPU a step: benchmarks/RESULTS.md, "KerasHub peer, side by
  side" and "Step cost");
  tied target embeddings; WordPiece vocabularies of about 4,000 pieces a side;
  eight geometric length buckets;
  Adam at 2e-3 after 400 warm-up updates, then inverse square root; label
  smoothing 0.1; the weights' moving average (``ema_momentum`` 0.999) is what is
  validated, kept and exported; XLA where the step runs on a GPU, not on CPUs
  (``jit_compile`` None: on a CPU its compilations cost more of a short budget
  than its cheaper step gives back); ``mixed_bfloat16`` where the device
  multiplies bfloat16 natively, float32 elsewhere (``mixed_precision`` "auto": on
  a CPU with ``avx512_bf16`` the step is cheaper with the same loss curve:
  benchmarks/RESULTS.md, "Step cost" and "float32 against bfloat16"). What each
  of these choices gave on Multi30k, against 8k untied vocabularies, four even
  buckets and 1e-3 after 800 updates, and the recipe beside the KerasHub peer:
  benchmarks/RESULTS.md, "KerasHub peer, side by side" and "Real language".
- ``student``: ``small`` made cheaper to serve, to be trained on a teacher's
  translations (docs/distillation.md): a 2-block encoder 256 wide with a 512-wide
  feed-forward layer, the default 128-unit GRU decoder, 128-wide tied embeddings,
  no deep output; trained as ``small`` is. Its served speed and its BLEU beside
  its teacher's, and the shapes measured against it: benchmarks/RESULTS.md,
  "Distillation".
- ``base``: a GPU-day recipe for corpora of 1M-10M pairs: a 6-block encoder 512
  wide, a two-layer residual, layer-normalized LSTM decoder with the attentional
  output, token-budget batches: updates of 8k tokens, accumulated from four
  2k-token batches (``accumulate_steps``).

Both use pre-layer-norm encoder blocks: post-layer-norm blocks at a learning rate
of 2e-3 with a short warm-up collapsed on Multi30k (the encoder output became the
same for every source; benchmarks/RESULTS.md "Real language").
"""

from keras_selfattn.config import ModelConfig, TrainConfig

__all__ = ["PRESETS", "preset_configs"]

# How ``small`` trains; ``student`` trains the same way, so that a student and its
# teacher differ by their shapes and their data alone.
_SMALL_TRAINING = {
    # the default peak learning rate (2e-3), reached in 400 updates
    "warmup_steps": 400,
    "label_smoothing": 0.1,
    "source_tokenizer": "subword",
    "target_tokenizer": "subword",
    "source_vocab_size": 4000,
    "target_vocab_size": 4000,
    # most sentences are far below the 100-token limits: little padding
    "length_buckets": 8,
    "bucket_spacing": "geometric",
    "epochs": 15,
    # validate, keep and export the weights' moving average
    "ema_momentum": 0.999,
    # XLA on a GPU, not on CPUs (TrainConfig.jit_compile says why)
    "jit_compile": None,
    # bfloat16 products where the device has them
    "mixed_precision": "auto",
}

PRESETS = {
    "small": {
        "model": {
            "num_hiddens": 256,
            "num_layers": 3,
            "ffn_hiddens": 1024,
            "decoder_units": 256,
            "embedding_dim": 256,
            "max_source_len": 100,
            "max_target_len": 100,
            "tie_embeddings": True,
            # a deep output: the decoder's per-token capacity
            "deep_output_hiddens": 1024,
        },
        "train": _SMALL_TRAINING,
    },
    "student": {
        "model": {
            # small's width with half its feed-forward width, and the default
            # two blocks: on Multi30k a third block served no faster or slower
            # (the decoder's steps are most of a search) and learned less in the
            # same steps
            "num_hiddens": 256,
            "ffn_hiddens": 512,
            # the default 128-unit GRU decoder, 128-wide tied embeddings and no
            # deep output: the per-step cost of the search
            "embedding_dim": 128,
            "max_source_len": 100,
            "max_target_len": 100,
            "tie_embeddings": True,
        },
        "train": _SMALL_TRAINING,
    },
    "base": {
        "model": {
            "num_hiddens": 512,
            "num_heads": 8,
            "num_layers": 6,
            "ffn_hiddens": 2048,
            "decoder_units": 512,
            "decoder_layers": 2,
            "rnn_type": "lstm",
            "embedding_dim": 512,
            "max_source_len": 128,
            "max_target_len": 128,
        },
        "train": {
            "batch_size": 128,
            # 8k-token updates from 2k-token batches (a 16-24 GB GPU holds them)
            "batch_tokens": 2048,
            "accumulate_steps": 4,
            "learning_rate": 7e-4,
            "warmup_steps": 4000,
            "label_smoothing": 0.1,
            "source_tokenizer": "subword",
            "target_tokenizer": "subword",
            "epochs": 40,
            "patience": 6,
            "validation_translations": 1000,
            "mixed_precision": "mixed_bfloat16",
        },
    },
}


def preset_configs(name):
    """The `ModelConfig` and `TrainConfig` of preset ``name``.

    Args:
        name: a key of `PRESETS` (``"small"``, ``"student"`` or ``"base"``).

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
