"""The help line of each option generated from `ModelConfig` and `TrainConfig`,
in the command line's words.

A field's ``Attributes:`` entry is written for Python callers and can run to ten
lines; ``--help`` shows one short line per option instead (`HELP`), so that
``keras-selfattn train --help`` fits on a screen or two, and docs/command-line.md
holds the longer explanations. A field with no entry here gets its docstring
entry, in the command line's spelling (`cli.flags`). `METAVARS` names what an
option takes (``N`` for a count unless said otherwise), and `SHOWN_DEFAULTS`
what an unset option means, where its default is not a value one could type
(the flag's default is None: "all", "learned"). Standard library only.
"""

__all__ = ["HELP", "METAVARS", "SHOWN_DEFAULTS"]

HELP = {
    # the model (ModelConfig)
    "num_hiddens": "width of the encoder",
    "num_heads": "encoder heads; divide --num-hiddens",
    "num_layers": "self-attention encoder blocks",
    "ffn_hiddens": "encoder feed-forward width",
    "dropout": "dropout of encoder and decoder",
    "norm_first": "layer norm before encoder sublayers",
    "decoder_units": "width of the decoder's recurrent cell",
    "decoder_layers": "stacked recurrent decoder layers",
    "rnn_type": "the decoder's recurrent cell",
    "attention_score": "Bahdanau's score or one of Luong's",
    "embedding_dim": "width of the target embedding",
    "max_source_len": "longest source in tokens",
    "max_target_len": "longest target decoded, in tokens",
    "position": "how the encoder knows token order",
    "max_relative_position": "farther offsets share one (--position relative)",
    "attentional_output": "decoder output reads the attention context",
    "decoder_residual": "residual links between decoder layers",
    "decoder_layer_norm": "layer norm between decoder layers",
    "attention_heads": "decoder heads; divide --decoder-units",
    "tie_embeddings": "target embedding as output layer",
    "deep_output_hiddens": "a feed-forward layer before the output (0: off)",
    # training (TrainConfig)
    "epochs": "at most this many epochs",
    "batch_size": "pairs a step trains on, in all",
    "learning_rate": "peak Adam learning rate",
    "warmup_steps": "warm-up updates, then inverse_sqrt or cosine",
    "clipnorm": "gradient norm clipping (0: off)",
    "adam_beta_2": "Adam's beta 2, in (0, 1)",
    "adam_epsilon": "Adam's epsilon, above 0",
    "label_smoothing": "smoothing of the targets, in [0, 1)",
    "seed": "seeds every random choice",
    "source_tokenizer": "how the source is split (subword: WordPiece)",
    "target_tokenizer": "how the target is split",
    "source_sentencepiece_model": "a SentencePiece model to use for the source",
    "target_sentencepiece_model": "the same for the target",
    "source_vocab_size": "source vocabulary size",
    "target_vocab_size": "the same for the target",
    "split_digits": "make every digit its own source token",
    "tokenizer_ops": "tensorflow_text ops, or core ones only",
    "patience": "validations without a better --best-by score (chrF by "
    "default) before training stops",
    "jit_compile": "compile the train step with XLA",
    "strategy": "how steps are spread over devices",
    "mixed_precision": "the step's precision (auto: bfloat16 if native)",
    "max_pairs": "read at most this many pairs",
    "tpu": "local, a TPU name or grpc://HOST:8470",
    "worker_timeout": "how long a worker waits for the others",
    "train_steps": "train this many steps",
    "eval_every": "steps between validations",
    "save_every": "steps between two backups",
    "length_buckets": "length buckets batches are padded to",
    "bucket_spacing": "how the buckets divide the length limits",
    "batch_tokens": "tokens per batch, not --batch-size",
    "shuffle_buffer": "pairs held in the shuffle buffer",
    "max_validation_pairs": "at most this many validation pairs",
    "max_test_pairs": "at most this many test pairs",
    "vocab_sample_lines": "pairs to learn vocabularies from",
    "skip_malformed": "skip and count malformed lines",
    "strict_columns": "a line of 3+ columns is malformed",
    "lr_schedule": "after warm-up: inverse_sqrt, or cosine to 5%",
    "best_by": "what the best model and early stopping follow",
    "validation_translations": "pairs translated at each validation",
    "log_every": "steps between progress lines in a log",
    "keep_checkpoints": "checkpoints kept for average (0: off)",
    "ema_momentum": "a moving average of weights (0: off)",
    "accumulate_steps": "batches per optimizer update",
    "tensorboard": "write RUN_DIR/tensorboard",
    "threads": "threads per TensorFlow pool",
}

# What an option takes, where it is not a count (N).
METAVARS = {
    "dropout": "RATE",
    "learning_rate": "RATE",
    "label_smoothing": "RATE",
    "clipnorm": "NORM",
    "adam_beta_2": "BETA",
    "adam_epsilon": "EPSILON",
    "ema_momentum": "DECAY",
    "worker_timeout": "SECONDS",
    "source_sentencepiece_model": "FILE",
    "target_sentencepiece_model": "FILE",
    "tpu": "ADDRESS",
}

# What an unset option means, where its default is None.
SHOWN_DEFAULTS = {
    "max_pairs": "all",
    "source_vocab_size": "all; 8000 pieces",
    "target_vocab_size": "as the source",
    "source_sentencepiece_model": "learned",
    "target_sentencepiece_model": "learned",
    "tpu": "found by TensorFlow",
    "train_steps": "--epochs passes",
    "eval_every": "an epoch, or 1000 steps",
    "save_every": "each validation",
    "batch_tokens": "off",
    "threads": "one per core",
}
