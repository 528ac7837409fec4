"""Sinusoidal positional encoding (Vaswani et al. 2017; d2l section 11.6)."""

from collections.abc import Sequence
from typing import Any

import keras
import numpy as np
from keras import ops

from keras_selfattn.layers.arguments import check_positive_int, check_rate, check_seed
from keras_selfattn.layers.dropout import HashDropout


def _static_int(value: Any) -> int | None:
    """``value`` as a Python int if known now (int, NumPy, eager tensor), else None."""
    if isinstance(value, bool):
        return None
    try:
        return int(value)
    except (TypeError, ValueError, NotImplementedError):  # a symbolic tensor
        return None


def sinusoidal_table(max_len: int, num_hiddens: int) -> np.ndarray:
    """The (max_len, num_hiddens) float32 table of d2l eq. 11.6.2.

    ``P[i, 2j] = sin(i / 10000^(2j/d))`` and ``P[i, 2j+1] = cos(i / 10000^(2j/d))``.
    Angles are computed in float64 and the table rounded once to float32, so every
    entry is the correctly rounded value even at large positions (a float16 or
    float32 angle computation drifts: keras-hub's float16 table is 0.78 off at 2048).
    Odd ``num_hiddens`` is allowed: every column follows the formula with its own
    ``j``, so the last column is a sine.
    """
    positions = np.arange(max_len, dtype=np.float64)[:, None]
    columns = np.arange(num_hiddens)
    exponents = (columns - columns % 2) / num_hiddens  # 2j / d for columns 2j, 2j+1
    angles = positions / np.power(10000.0, exponents)[None, :]
    table = np.where(columns % 2 == 0, np.sin(angles), np.cos(angles))
    return table.astype(np.float32)


@keras.saving.register_keras_serializable(package="keras_selfattn")
class PositionalEncoding(keras.layers.Layer):
    """Adds the fixed sinusoidal position table to a sequence, then applies dropout.

    For inputs ``X`` of shape ``(batch, T, num_hiddens)`` the layer returns
    ``dropout(X + P[:, start:start + T, :])`` where ``P`` is the table of Dive into
    Deep Learning eq. 11.6.2: ``P[0, i, 2j] = sin(i / 10000^(2j/d))`` and
    ``P[0, i, 2j+1] = cos(i / 10000^(2j/d))``. The table is computed once in float64,
    stored in float32 and cast once to the compute dtype. ``start`` lets a decoder
    encode one position at a time: position ``t`` alone equals row ``t`` of the full
    pass. The layer has no weights; a Keras mask passes through unchanged.

    Odd ``num_hiddens`` is accepted: every column follows the formula with its own
    ``j`` (column ``c`` uses ``2j = c - c % 2``), so the last column is a sine.

    Args:
        num_hiddens: int, the feature size ``d``; the input's last dimension must
            equal it.
        dropout: float in [0, 1), dropout rate applied after the addition.
        max_len: int, the number of positions in the table; ``start + T`` must not
            exceed it.
        seed: optional int, seed of the dropout.
        **kwargs: base layer arguments (``name``, ``dtype``, ...).

    Call arguments:
        inputs: float tensor ``(batch, T, num_hiddens)``.
        start: int or scalar int tensor, the position of ``inputs[:, 0]``
            (default 0). A negative ``start``, or ``start + T > max_len``, known
            when the layer is called (a Python or NumPy int, an eager tensor,
            a static length) raises ValueError. Known only at run time (a
            symbolic ``start`` or length inside ``tf.function``, ``jit_compile``
            or a functional model), the rows of positions outside the table are
            NaN: XLA cannot raise there.
        training: bool, whether dropout is active.

    Returns:
        A tensor of the input's shape in the layer's compute dtype.

    Example:

    >>> import numpy as np, keras_selfattn
    >>> pe = keras_selfattn.layers.PositionalEncoding(num_hiddens=32, max_len=60)
    >>> y = pe(np.zeros((1, 60, 32), "float32"))
    >>> tuple(y.shape), tuple(pe.P.shape)
    ((1, 60, 32), (1, 60, 32))

    References:
        Vaswani et al. 2017, "Attention Is All You Need", section 3.5.
        Zhang et al., "Dive into Deep Learning", section 11.6.3.
    """

    def __init__(
        self,
        num_hiddens: int,
        dropout: float = 0.0,
        max_len: int = 1000,
        seed: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        num_hiddens = check_positive_int("num_hiddens", num_hiddens)
        max_len = check_positive_int("max_len", max_len)
        dropout = check_rate("dropout", dropout)
        seed = check_seed(seed)
        self.num_hiddens = num_hiddens
        self.dropout = dropout
        self.max_len = max_len
        self.seed = seed
        self.supports_masking = True
        self._table = self._fixed_table()
        self.dropout_layer = HashDropout(
            dropout, seed=seed, dtype=self.dtype_policy, name="dropout"
        )

    def _fixed_table(self) -> np.ndarray | None:
        """The (max_len, num_hiddens) NumPy table; None where the table is a weight."""
        return sinusoidal_table(self.max_len, self.num_hiddens)

    def _table_in(self, dtype: str) -> Any:
        """The whole (max_len, num_hiddens) table as a tensor of ``dtype``."""
        return ops.convert_to_tensor(self._table, dtype=dtype)

    @property
    def P(self) -> Any:
        """The (1, max_len, num_hiddens) float32 table (d2l's ``P``)."""
        return self._table_in("float32")[None]

    def _check_shape(
        self, input_shape: Sequence[int | None], start: int | None = 0
    ) -> None:
        if len(input_shape) != 3:
            raise ValueError(
                f"{type(self).__name__} expects inputs of shape (batch, T, "
                f"num_hiddens). Received: inputs.shape={tuple(input_shape)}"
            )
        if input_shape[-1] is not None and input_shape[-1] != self.num_hiddens:
            raise ValueError(
                "The last dimension of inputs must equal num_hiddens. Received: "
                f"inputs.shape[-1]={input_shape[-1]}, num_hiddens={self.num_hiddens}"
            )
        if start is not None and start < 0:
            raise ValueError(
                f"start must be a non-negative position. Received: start={start}"
            )
        length = input_shape[1]
        if length is not None and start is not None and start + length > self.max_len:
            raise ValueError(
                "The sequence is longer than the positional table. "
                f"Received: start + T = {start} + {length} = {start + length}, "
                f"max_len={self.max_len}"
            )

    def build(self, input_shape: Sequence[int | None]) -> None:
        self._check_shape(input_shape)
        self.dropout_layer.build(input_shape)
        self.built = True

    def call(self, inputs: Any, start: Any = 0, training: bool | None = None) -> Any:
        static_start = _static_int(start)
        self._check_shape(tuple(inputs.shape), static_start)
        length = ops.shape(inputs)[1]
        table = self._table_in(self.compute_dtype)
        if static_start is not None and isinstance(inputs.shape[1], int):
            # Everything known now and checked above: a plain slice.
            positions = ops.slice(
                table, (static_start, 0), (inputs.shape[1], self.num_hiddens)
            )
        else:
            # A start or a length known only at run time (a tensor start inside
            # tf.function, jit or a functional model): positions outside the
            # table cannot raise under XLA, so their rows are NaN -- a defined,
            # visible result instead of a backend slice error or a silently
            # clamped slice.
            positions = ops.arange(length, dtype="int32") + ops.cast(start, "int32")
            inside = ops.logical_and(positions >= 0, positions < self.max_len)
            rows = ops.take(table, ops.clip(positions, 0, self.max_len - 1), axis=0)
            positions = ops.where(
                inside[:, None], rows, ops.cast(float("nan"), rows.dtype)
            )
        outputs = ops.cast(inputs, self.compute_dtype) + positions[None]
        return self.dropout_layer(outputs, training=training)

    def compute_mask(self, inputs: Any, mask: Any = None) -> Any:
        return mask

    def compute_output_shape(
        self, input_shape: Sequence[int | None]
    ) -> tuple[int | None, ...]:
        return tuple(input_shape)

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config.update(
            {
                "num_hiddens": self.num_hiddens,
                "dropout": self.dropout,
                "max_len": self.max_len,
                "seed": self.seed,
            }
        )
        return config
