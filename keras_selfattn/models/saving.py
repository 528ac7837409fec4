"""Loading a ``.keras`` file of this package's models: the one place that does it.

`keras.saving.load_model` finds a custom class only once the module that
registers it has been imported. The package's names load lazily, so a process
that has imported only the command line or `keras_selfattn.translation` may not
have imported them yet; `load_model` imports every module whose classes a saved
model or its compile configuration holds (the model, its layers, the loss and
metric, the optimizer and its learning-rate schedule) and then loads.
"""

import keras

# Imported for their registrations (@keras.saving.register_keras_serializable).
from keras_selfattn.models import losses, optimizers, schedules, seq2seq  # noqa: F401

__all__ = ["check_dtype_policy", "load_model", "with_dtype_policy"]


def load_model(path, dtype=None, **kwargs):
    """``keras.saving.load_model(path, **kwargs)`` with the package's classes known.

    Args:
        path: a ``.keras`` file.
        dtype: None (default): the model computes under the dtype policy it was
            saved with; a policy name (``"float32"``, ``"mixed_bfloat16"``...):
            a `Seq2Seq` is rebuilt under that one (`with_dtype_policy`), e.g. a
            model trained in bfloat16 to run in float32 on a CPU without
            bfloat16 units.
        **kwargs: passed to `keras.saving.load_model` (``compile``, ``safe_mode``).

    Returns:
        the loaded model.
    """
    model = keras.saving.load_model(path, **kwargs)
    return model if dtype is None else with_dtype_policy(model, dtype)


def with_dtype_policy(model, dtype):
    """A copy of the `Seq2Seq` ``model`` that computes under the policy ``dtype``.

    The same architecture built from ``model.get_config()`` with ``dtype`` for
    its policy, holding the same weights. Under Keras' mixed policies the
    weights are float32 already, so nothing is rounded: a model trained under
    ``"mixed_bfloat16"`` and copied to ``"float32"`` computes what the bfloat16
    products approximated. ``model`` itself is unchanged; a model already under
    ``dtype`` is returned as it is.

    Args:
        model: a `Seq2Seq` (as `load_model` or `build_seq2seq` return it).
        dtype: a Keras dtype policy name (``"float32"``, ``"mixed_bfloat16"``,
            ``"mixed_float16"``...) or a ``keras.DTypePolicy``.

    Raises:
        ValueError: ``dtype`` is not a policy Keras knows.
        TypeError: ``model`` is not a `Seq2Seq`.
    """
    if not isinstance(model, seq2seq.Seq2Seq):  # checked first: nothing to copy
        raise TypeError(
            "with_dtype_policy copies a Seq2Seq. "
            f"Received: model of type {type(model).__name__}"
        )
    policy = check_dtype_policy(dtype)
    if policy.name == model.layers_dtype_policy.name:
        return model
    config = {**model.get_config(), "dtype": keras.dtype_policies.serialize(policy)}
    copy = seq2seq.Seq2Seq.from_config(config)
    copy.set_weights(model.get_weights())
    return copy


def check_dtype_policy(dtype):
    """The ``keras.DTypePolicy`` named ``dtype``; a ValueError naming it if none."""
    try:
        return keras.dtype_policies.get(dtype)
    except Exception as error:
        raise ValueError(
            "dtype must be a Keras dtype policy such as 'float32' or "
            f"'mixed_bfloat16'. Received: dtype={dtype!r}"
        ) from error
