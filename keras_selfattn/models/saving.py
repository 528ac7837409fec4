"""Loading a ``.keras`` file of this package's models: the one place that does it.

`keras.saving.load_model` finds a custom class only once the module that
registers it has been imported (``import keras_selfattn`` registers every class
of the package). A class Keras cannot find is one `MissingClassError` that leads
with the class name and the import that fixes it, instead of Keras' "could not
be deserialized properly" with the cause buried in the middle.
"""

import re

import keras

# Imported for their registrations (@keras.saving.register_keras_serializable).
from keras_selfattn.models import losses, optimizers, schedules, seq2seq  # noqa: F401

__all__ = [
    "MissingClassError",
    "check_dtype_policy",
    "load_model",
    "missing_class_error",
    "with_dtype_policy",
]

# What Keras says of a class it cannot find, and the name it was registered under
# (``"package>Class"``) in the same message's config.
_COULD_NOT_LOCATE = re.compile(r"Could not locate class '([^']+)'")
_REGISTERED_NAME = "'registered_name': '([^'>]+)>{}'"


class MissingClassError(ValueError):
    """A ``.keras`` file uses a class that is not registered in this process.

    Attributes:
        class_name: the class Keras could not find.
        package: the package it was registered by (None if the file does not say).
    """

    def __init__(self, path, class_name, package):
        self.class_name = class_name
        self.package = package
        where = f" (package {package})" if package else ""
        module = package or "the module that defines it"
        super().__init__(
            f"{path} uses class {class_name}{where}, which is not registered in "
            f"this process; import {module} before loading it"
        )


def missing_class_error(path, error):
    """The `MissingClassError` that Keras' ``error`` reports, or None.

    Args:
        path: the ``.keras`` file that was loaded.
        error: what `keras.saving.load_model` raised.
    """
    found = _COULD_NOT_LOCATE.search(str(error))
    if found is None:
        return None
    class_name = found.group(1)
    package = re.search(_REGISTERED_NAME.format(re.escape(class_name)), str(error))
    return MissingClassError(path, class_name, package and package.group(1))


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

    Raises:
        MissingClassError: the file uses a class that is not registered.
    """
    try:
        model = keras.saving.load_model(path, **kwargs)
    except (TypeError, ValueError) as error:
        missing = missing_class_error(path, error)
        if missing is None:
            raise
        raise missing from error
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
