"""`build_seq2seq`: a self-attention encoder and a Bahdanau decoder, as one functional model."""

import keras
from keras import ops

from keras_selfattn.layers import (
    BahdanauDecoder,
    LearnedPositionalEncoding,
    PositionalEncoding,
)
from keras_selfattn.models.blocks import (
    DecoderBridge,
    ScaledTokenEmbedding,
    TransformerEncoderBlock,
)
from keras_selfattn.models.config import ModelConfig

PAD_ID = 0


def build_seq2seq(
    source_vocab_size, target_vocab_size, config=None, seed=None, **overrides
):
    """Builds the encoder-decoder translation model with the functional API.

    Encoder: ``ScaledTokenEmbedding`` (id 0 is padding and masked, scaled by
    sqrt(num_hiddens)) -> position -> ``num_layers`` x ``TransformerEncoderBlock``
    (``MultiHeadSelfAttention``, residual, layer norm, feed-forward). The position
    comes from ``config.position``: ``"sinusoidal"`` adds the fixed table
    (``PositionalEncoding``, the default), ``"learned"`` a trainable one
    (``LearnedPositionalEncoding``); ``"relative"`` (Shaw et al. 2018, offsets
    clipped at ``max_relative_position``) and ``"rotary"`` (RoPE, Su et al. 2021)
    add nothing to the embeddings (only dropout) and let every self-attention see
    offsets instead. Bridge: the masked mean of the encoder output, one
    ``Dense(tanh)`` per decoder state, is the decoder's initial state. Decoder:
    target embedding -> ``BahdanauDecoder`` attending over the encoder output with
    the encoder's padding mask -> ``Dense(target_vocab_size)`` logits in float32.

    Args:
        source_vocab_size: int, number of source token ids (0 = padding).
        target_vocab_size: int, number of target token ids (0 = padding).
        config: a `ModelConfig`; defaults to ``ModelConfig()``.
        seed: optional int; the dropout seeds derive from it.
        **overrides: `ModelConfig` fields to override (``num_layers=4`` ...).

    Returns:
        A `keras.Model` with inputs ``{"source": (B, T) int32, "target_in": (B, S)
        int32}`` and logits ``(B, S, target_vocab_size)``. Its ``config`` attribute
        is not set; keep the `ModelConfig` beside it (the run directory does).

    Example:

    >>> import keras_selfattn
    >>> model = keras_selfattn.build_seq2seq(100, 50, num_hiddens=32, num_heads=4,
    ...                                      num_layers=1, ffn_hiddens=64, decoder_units=32)
    >>> model.output.shape
    (None, None, 50)
    """
    config = ModelConfig(**{**vars(config or ModelConfig()), **overrides})
    for name, value in (
        ("source_vocab_size", source_vocab_size),
        ("target_vocab_size", target_vocab_size),
    ):
        if not isinstance(value, int) or value < 5:
            raise ValueError(
                f"{name} must be an integer of at least 5 (padding, unknown, start, end and one token). "
                f"Received: {name}={value}"
            )

    def layer_seed(offset):
        return None if seed is None else seed + offset

    source = keras.Input(shape=(None,), dtype="int32", name="source")
    target_in = keras.Input(shape=(None,), dtype="int32", name="target_in")

    x = ScaledTokenEmbedding(
        source_vocab_size, config.num_hiddens, name="source_embedding"
    )(source)
    position_options = {}
    if config.position in ("sinusoidal", "learned"):
        encoding = (
            PositionalEncoding
            if config.position == "sinusoidal"
            else LearnedPositionalEncoding
        )
        x = encoding(
            config.num_hiddens,
            dropout=config.dropout,
            max_len=config.max_source_len,
            seed=layer_seed(0),
            name="positional_encoding",
        )(x)
    else:
        x = keras.layers.Dropout(
            config.dropout, seed=layer_seed(0), name="embedding_dropout"
        )(x)
        if config.position == "relative":
            position_options["max_relative_position"] = config.max_relative_position
        else:
            position_options["use_rotary"] = True
    for i in range(config.num_layers):
        x = TransformerEncoderBlock(
            config.num_hiddens,
            config.num_heads,
            config.ffn_hiddens,
            dropout=config.dropout,
            norm_first=config.norm_first,
            seed=layer_seed(1 + i),
            name=f"encoder_block_{i}",
            **position_options,
        )(x)
    if config.norm_first:
        x = keras.layers.LayerNormalization(epsilon=1e-5, name="encoder_final_norm")(x)
    memory = x

    num_states = config.decoder_layers * (2 if config.rnn_type == "lstm" else 1)
    initial_state = DecoderBridge(config.decoder_units, num_states, name="bridge")(
        memory
    )

    y = keras.layers.Embedding(
        target_vocab_size, config.embedding_dim, mask_zero=True, name="target_embedding"
    )(target_in)
    y = BahdanauDecoder(
        config.decoder_units,
        num_layers=config.decoder_layers,
        rnn_type=config.rnn_type,
        attention_score=config.attention_score,
        dropout=config.dropout,
        seed=layer_seed(100),
        name="decoder",
    )(y, memory, initial_state=initial_state)
    logits = keras.layers.Dense(target_vocab_size, dtype="float32", name="logits")(y)
    return keras.Model(
        {"source": source, "target_in": target_in}, logits, name="seq2seq"
    )


def masked_loss():
    """Token cross-entropy over the non-padding target positions (mean over real tokens)."""
    return keras.losses.SparseCategoricalCrossentropy(
        from_logits=True, ignore_class=PAD_ID, name="masked_crossentropy"
    )


@keras.saving.register_keras_serializable(package="keras_selfattn")
class MaskedAccuracy(keras.metrics.Metric):
    """Share of non-padding target tokens whose arg-max prediction is right."""

    def __init__(self, name="accuracy", pad_id=PAD_ID, **kwargs):
        super().__init__(name=name, **kwargs)
        self.pad_id = pad_id
        self.correct = self.add_variable((), initializer="zeros", name="correct")
        self.count = self.add_variable((), initializer="zeros", name="count")

    def update_state(self, y_true, y_pred, sample_weight=None):
        y_true = ops.cast(y_true, "int32")
        predicted = ops.cast(ops.argmax(y_pred, axis=-1), "int32")
        weights = ops.cast(ops.not_equal(y_true, self.pad_id), "float32")
        if sample_weight is not None:
            weights = weights * ops.cast(sample_weight, "float32")
        hits = ops.cast(ops.equal(predicted, y_true), "float32") * weights
        self.correct.assign_add(ops.sum(hits))
        self.count.assign_add(ops.sum(weights))

    def result(self):
        return ops.divide_no_nan(self.correct, self.count)

    def get_config(self):
        return {**super().get_config(), "pad_id": self.pad_id}
