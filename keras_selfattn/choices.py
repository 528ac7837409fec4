"""The allowed values of the enumerated options, in one Keras-free place.

The search defaults (beam size, length penalty) live here too, for the same reason.

The layers validate their arguments against these tuples, and the configuration
dataclasses and the command line offer them as choices; keeping them here lets
``keras-selfattn --help`` and `ModelConfig` work without importing Keras.
"""

# BahdanauAttention(score=...) and ModelConfig.attention_score.
SCORES = ("additive", "dot", "general", "scaled_dot")
# BahdanauDecoder(rnn_type=...) and ModelConfig.rnn_type.
RNN_TYPES = ("gru", "lstm")
# get_strategy(name) and TrainConfig.strategy.
STRATEGIES = ("auto", "default", "mirrored", "multi_worker", "tpu")

# Tokenizer kinds (TokenizerConfig.kind, TrainConfig.source_tokenizer/target_tokenizer).
TOKENIZER_KINDS = ("word", "char", "subword", "sentencepiece")
# Tokenizer ops (TokenizerConfig.ops, TrainConfig.tokenizer_ops).
TOKENIZER_OPS = ("tensorflow_text", "core")
# The beam search defaults (decoding, the translator, the served signatures, the
# command line, which reads them before TensorFlow loads).
DEFAULT_BEAM_SIZE = 4
# The vocabulary shortlist (export --shortlist), as Marian's students are served
# ("--shortlist lex.s2t 50 50"): the 50 most frequent target pieces and the 50 best
# of each source piece.
DEFAULT_FREQUENT = 50
# The served model's name (TF Serving's --model_name, the warmup records' and the
# clients' model_spec.name), unless the user chooses another.
DEFAULT_MODEL_NAME = "translator"
# The model server flag without which a CPU server fails on a function compiled
# with XLA (tf.function(jit_compile=True)).
XLA_SERVER_FLAG = "--xla_cpu_compilation_enabled=true"
DEFAULT_PER_SOURCE = 50
DEFAULT_LENGTH_PENALTY = 0.6  # GNMT's alpha (Wu et al. 2016)
# SearchSettings.search: the searches a translator and an export run.
SEARCHES = ("greedy", "beam")
# SearchSettings.precision (--precision): the searches' products.
SEARCH_PRECISIONS = ("float32", "bfloat16")
# SearchSettings.quantize (--quantize): the products' kernels held as int8.
QUANTIZATIONS = ("int8",)
# Steps a sentence is searched for beyond ``max_length_ratio`` times its
# source's tokens (`keras_selfattn.decoding.loop.length_caps`,
# --max-length-ratio): a short source needs room that a ratio alone does not
# give (a two-token source at ratio 1.5 would get 3 steps).
LENGTH_CAP_MARGIN = 10
# Length groups a served request is searched in, at once (export_run(groups=...),
# `keras-selfattn export --groups`): two loops keep two cores busy.
DEFAULT_GROUPS = 2
# TrainConfig.lr_schedule.
LR_SCHEDULES = ("inverse_sqrt", "cosine")
# TrainConfig.bucket_spacing and bucket_shapes(spacing=...): how the length
# buckets divide the model's limits.
BUCKET_SPACINGS = ("even", "geometric")
# TrainConfig.best_by: what the best model and early stopping follow.
BEST_BY = ("chrf", "bleu", "loss")

__all__ = [
    "BEST_BY",
    "BUCKET_SPACINGS",
    "DEFAULT_BEAM_SIZE",
    "DEFAULT_FREQUENT",
    "DEFAULT_GROUPS",
    "DEFAULT_LENGTH_PENALTY",
    "DEFAULT_MODEL_NAME",
    "DEFAULT_PER_SOURCE",
    "LENGTH_CAP_MARGIN",
    "LR_SCHEDULES",
    "QUANTIZATIONS",
    "RNN_TYPES",
    "SCORES",
    "SEARCHES",
    "SEARCH_PRECISIONS",
    "STRATEGIES",
    "TOKENIZER_KINDS",
    "TOKENIZER_OPS",
    "XLA_SERVER_FLAG",
]
