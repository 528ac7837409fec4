"""Learned (trainable) absolute positional encoding (Gehring et al. 2017; BERT)."""

from collections.abc import Sequence
from typing import Any

import keras
from keras import ops

from keras_selfattn.layers.positional_encoding import PositionalEncoding


@keras.saving.register_keras_serializable(package="keras_selfattn")
class LearnedPositionalEncoding(PositionalEncoding):
    """Adds a trainable position table to a sequence, then applies dropout.

    The call contract is `PositionalEncoding`'s: for inputs ``X`` of shape ``(batch, T,
    num_hiddens)`` the layer returns ``dropout(X + P[:, start:start + T, :])``, but
    ``P`` is a weight of shape ``(max_len, num_hiddens)`` (named
    ``position_embeddings``) learned with the rest of the model instead of the fixed
    sinusoidal table. It answers d2l exercise 11.6.2 ("can positional encodings be
    learned?"). A row that no training sequence reached keeps its random initial value,
    so the layer does not generalize to positions beyond the longest training sequence
    (see ``benchmarks/positions.py``). ``start`` lets a decoder encode one position at a
    time: position ``t`` alone equals row ``t`` of the full pass. The table is stored in
    the variable dtype (float32 under mixed precision) and cast once to the compute
    dtype; a Keras mask passes through unchanged.

    Args:
        num_hiddens: int, the feature size ``d``; the input's last dimension must
            equal it.
        dropout: float in [0, 1), dropout rate applied after the addition.
        max_len: int, the number of positions in the table; ``start + T`` must not
            exceed it.
        embeddings_initializer: initializer of the table (random by default, so that
            positions differ from the first step).
        seed: optional int, seed of the dropout.
        **kwargs: base layer arguments (``name``, ``dtype``, ...).

    Call arguments:
        inputs: float tensor ``(batch, T, num_hiddens)``.
        start: int or scalar int tensor, the position of ``inputs[:, 0]``
            (default 0); checked as in `PositionalEncoding` (ValueError when
            known at the call, NaN rows outside the table when known only at
            run time).
        training: bool, whether dropout is active.

    Returns:
        A tensor of the input's shape in the layer's compute dtype.

    Example:

    >>> import numpy as np, keras_selfattn
    >>> pe = keras_selfattn.layers.LearnedPositionalEncoding(num_hiddens=32, max_len=60)
    >>> y = pe(np.zeros((1, 60, 32), "float32"))
    >>> tuple(y.shape), tuple(pe.P.shape)
    ((1, 60, 32), (1, 60, 32))

    References:
        Gehring et al. 2017, "Convolutional Sequence to Sequence Learning", section 3.1.
        Vaswani et al. 2017, "Attention Is All You Need", section 3.5 (learned vs
        sinusoidal).
        Zhang et al., "Dive into Deep Learning", section 11.6, exercise 2.
    """

    def __init__(
        self,
        num_hiddens: int,
        dropout: float = 0.0,
        max_len: int = 1000,
        embeddings_initializer: str | keras.initializers.Initializer = "random_normal",
        seed: int | None = None,
        **kwargs: Any,
    ) -> None:
        self.embeddings_initializer = keras.initializers.get(embeddings_initializer)
        super().__init__(
            num_hiddens, dropout=dropout, max_len=max_len, seed=seed, **kwargs
        )

    def _fixed_table(self) -> None:
        return None  # the table is the weight ``position_embeddings``, made in build()

    def _table_in(self, dtype: str) -> Any:
        return ops.cast(self.position_embeddings, dtype)

    def build(self, input_shape: Sequence[int | None]) -> None:
        self._check_shape(input_shape)
        self.position_embeddings = self.add_weight(
            shape=(self.max_len, self.num_hiddens),
            initializer=self.embeddings_initializer,
            name="position_embeddings",
        )
        super().build(input_shape)

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config["embeddings_initializer"] = keras.initializers.serialize(
            self.embeddings_initializer
        )
        return config
