"""How the encoder of a `Seq2Seq` sees positions (``ModelConfig.position``).

``"sinusoidal"`` adds the fixed table (`PositionalEncoding`), ``"learned"`` a
trainable one (`LearnedPositionalEncoding`); ``"relative"`` (Shaw et al. 2018)
and ``"rotary"`` add nothing to the embeddings and let the attention of every
encoder block see the offsets instead, so the embeddings only get dropout.
"""

from keras_selfattn.layers import LearnedPositionalEncoding, PositionalEncoding
from keras_selfattn.layers.dropout import HashDropout

__all__ = ["create_position"]


def create_position(config, policy, seed):
    """The layer applied to the scaled embeddings, and the encoder blocks' options.

    Args:
        config: the `ModelConfig` (``position``, ``num_hiddens``, ``dropout``,
            ``max_source_len``, ``max_relative_position``).
        policy: the dtype policy of the layer.
        seed: the dropout seed of the layer (optional int).

    Returns:
        ``(layer, options)``: the layer named ``positional_encoding`` (or
        ``embedding_dropout``), and the keyword arguments every
        `TransformerEncoderBlock` takes for the position (empty, or
        ``max_relative_position``, or ``use_rotary``).
    """
    if config.position in ("sinusoidal", "learned"):
        encoding = (
            PositionalEncoding
            if config.position == "sinusoidal"
            else LearnedPositionalEncoding
        )
        layer = encoding(
            config.num_hiddens,
            dropout=config.dropout,
            max_len=config.max_source_len,
            seed=seed,
            name="positional_encoding",
            dtype=policy,
        )
        return layer, {}
    layer = HashDropout(
        config.dropout, seed=seed, name="embedding_dropout", dtype=policy
    )
    if config.position == "relative":
        return layer, {"max_relative_position": config.max_relative_position}
    return layer, {"use_rotary": True}
