"""`HashDropout`: `keras.layers.Dropout` with masks from a counter hash, not an RNG.

Keras' dropout draws its mask with the backend's random generator; compiled by
XLA on a CPU (how ``train`` runs its step) that costs about 20 ns an element,
40 times the arithmetic it masks: a third of a ``--preset small`` training step
(benchmarks/RESULTS.md, "Step cost"). Here the mask is the bits of a hash of
each element's index and the call's seed, a handful of integer operations that
XLA fuses into the multiply: the same distribution (each element kept with
probability ``1 - rate``, independently of its neighbours and of other calls),
a cheaper draw.

The hash is lowbias32 (Wellons 2018, a 32-bit integer finalizer; every bit of
its output depends on every bit of its input), applied twice with the call's
key between: ``bits = mix(mix(index) ^ key)``, ``key = mix(s0 ^ mix(s1 +
0x9E3779B9))`` for the seed pair ``(s0, s1)`` the layer's
`keras.random.SeedGenerator` gives this call (``s1`` counts the calls, ``s0``
is the layer's seed). An element is kept when ``bits >= round(rate * 2**32)``.
The masks repeat only after 2**32 elements within one call.
"""

import keras
from keras import ops

__all__ = ["HashDropout", "hash_bits"]

_GOLDEN = 0x9E3779B9  # 2**32 / golden ratio: spreads consecutive counters
_MULTIPLIERS = (0x7FEB352D, 0x846CA68B)


def _mix(x):
    """lowbias32 on a uint32 tensor (wrapping multiplies, logical shifts)."""
    x = ops.bitwise_xor(x, ops.right_shift(x, 16))
    x = x * ops.cast(_MULTIPLIERS[0], "uint32")
    x = ops.bitwise_xor(x, ops.right_shift(x, 15))
    x = x * ops.cast(_MULTIPLIERS[1], "uint32")
    return ops.bitwise_xor(x, ops.right_shift(x, 16))


def hash_bits(shape, seed):
    """32 random-looking bits (uint32) for every element of ``shape``.

    Args:
        shape: the shape (ints or scalar tensors).
        seed: a pair of integers (a `SeedGenerator`'s draw).

    Returns:
        A uint32 tensor of ``shape``: ``mix(mix(index) ^ key)`` of each
        element's row-major index (see the module docstring).
    """
    seed = ops.cast(seed, "uint32")
    key = _mix(ops.bitwise_xor(seed[0], _mix(seed[1] + ops.cast(_GOLDEN, "uint32"))))
    size = 1
    for dim in shape:
        size = size * dim
    # int32 then uint32: XLA has no unsigned range.
    index = ops.cast(ops.reshape(ops.arange(size, dtype="int32"), shape), "uint32")
    return _mix(ops.bitwise_xor(_mix(index), key))


@keras.saving.register_keras_serializable(package="keras_selfattn")
class HashDropout(keras.layers.Dropout):
    """Dropout whose mask is a hash of each element's index and the call's seed.

    A drop-in `keras.layers.Dropout` (the same arguments, configuration and
    seed state, so a model saved with either loads with either) that is cheap
    under XLA on a CPU; see the module docstring for the construction. On
    backends without unsigned 32-bit integer arithmetic (torch) it falls back
    to Keras' own dropout.

    Args:
        rate: float in [0, 1], the fraction of the inputs set to 0; the others
            are scaled by ``1 / (1 - rate)``.
        noise_shape: optional shape of the mask, broadcast over the inputs
            (None entries take the inputs' sizes), as in `keras.layers.Dropout`.
        seed: optional int; the same seed draws the same masks call by call.

    Call arguments:
        inputs: a tensor of any shape.
        training: bool, whether to drop (a no-op otherwise).

    Example:

    >>> import numpy as np
    >>> layer = HashDropout(0.5, seed=1)
    >>> out = keras.ops.convert_to_numpy(layer(np.ones((4, 1000)), training=True))
    >>> sorted(set(out.ravel().tolist()))
    [0.0, 2.0]
    >>> bool(abs((out == 0).mean() - 0.5) < 0.03)
    True
    """

    def call(self, inputs, training=False):
        if not training or self.rate == 0:
            return inputs
        if self.rate == 1:
            return ops.zeros_like(inputs)
        if keras.backend.backend() not in ("tensorflow", "jax"):
            return super().call(inputs, training=training)
        shape = ops.shape(inputs)
        if self.noise_shape is not None:
            shape = tuple(
                size if dim is None else dim
                for size, dim in zip(shape, self.noise_shape, strict=True)
            )
        bits = hash_bits(shape, self.seed_generator.next())
        threshold = min(round(self.rate * 2**32), 2**32 - 1)
        keep = ops.greater_equal(bits, ops.cast(threshold, "uint32"))
        scale = ops.cast(1.0 / (1.0 - self.rate), inputs.dtype)
        return ops.where(keep, inputs * scale, ops.zeros_like(inputs))
