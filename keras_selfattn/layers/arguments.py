"""Constructor-argument helpers shared by the layers: checks and fresh initializers.

Every layer checks its constructor arguments with these functions, so that one
idiom gives one error form, Keras' own:
``ValueError("<name> must be ... Received: <name>=<value!r>")``. Booleans are never
accepted as numbers (``True`` is an ``int`` in Python). Each check returns the value
converted to the plain Python type the layer stores (``numpy.int64(4)`` becomes
``4``), so ``get_config`` stays JSON-serializable.

`clone_initializer` is the one way a layer hands an initializer argument to a
sublayer or a weight: a Keras initializer without an explicit seed draws its seed
once, so one instance shared by two weights would give both the same values (or
rescaled copies of them).
"""

import numbers

import keras

__all__ = [
    "check_choice",
    "check_positive_int",
    "check_positive_number",
    "check_rate",
    "check_seed",
    "clone_initializer",
]


def _is_integer(value):
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_real(value):
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def check_positive_int(name, value, allow_none=False):
    """``value`` as an ``int`` > 0 (None too with ``allow_none``); else ValueError."""
    if value is None and allow_none:
        return None
    if not _is_integer(value) or value <= 0:
        prefix = "None or " if allow_none else ""
        raise ValueError(
            f"{name} must be {prefix}a positive integer. Received: {name}={value!r}"
        )
    return int(value)


def check_bool(name, value):
    """``value`` if it is True or False; ValueError otherwise (1, "yes", None...)."""
    if not isinstance(value, bool):
        raise ValueError(  # noqa: TRY004  (Keras' error form: ValueError)
            f"{name} must be True or False. Received: {name}={value!r}"
        )
    return value


def check_positive_number(name, value):
    """``value`` as a ``float`` > 0; ValueError otherwise."""
    if not _is_real(value) or not value > 0:
        raise ValueError(
            f"{name} must be a positive number. Received: {name}={value!r}"
        )
    return float(value)


def check_rate(name, value):
    """``value`` as a ``float`` in [0, 1) (a dropout rate); ValueError otherwise."""
    if not _is_real(value) or not 0.0 <= value < 1.0:
        raise ValueError(
            f"{name} must be a float in [0, 1). Received: {name}={value!r}"
        )
    return float(value)


def check_seed(value, name="seed"):
    """``value`` as an ``int``, or None; ValueError otherwise."""
    if value is None:
        return None
    if not _is_integer(value):
        raise ValueError(
            f"{name} must be None or an integer. Received: {name}={value!r}"
        )
    return int(value)


def check_choice(name, value, choices):
    """``value`` when it is one of ``choices``; ValueError otherwise."""
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {choices}. Received: {name}={value!r}")
    return value


def clone_initializer(initializer, seed_offset=0):
    """A new initializer object with ``initializer``'s configuration.

    Args:
        initializer: a `keras.initializers.Initializer`.
        seed_offset: added to an explicit integer seed, so that two weights of
            the same shape cloned from one seeded initializer draw different
            values; ignored when the initializer has no integer seed.

    Returns:
        A fresh `keras.initializers.Initializer` of the same class.

    Example:

    >>> import keras
    >>> from keras_selfattn.layers.arguments import clone_initializer
    >>> base = keras.initializers.GlorotUniform(seed=3)
    >>> clone_initializer(base, seed_offset=1).get_config()["seed"]
    4
    """
    if not isinstance(initializer, keras.initializers.Initializer):
        initializer = keras.initializers.get(initializer)
    config = initializer.get_config()
    if seed_offset and _is_integer(config.get("seed")):
        config["seed"] += seed_offset
    return initializer.__class__.from_config(config)


def check_vocab_size(name, value):
    """A vocabulary size: an int of at least 5 (padding, unknown, start, end and one
    token)."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 5:
        raise ValueError(
            f"{name} must be an integer of at least 5 (padding, unknown, start, end "
            f"and one token). Received: {name}={value!r}"
        )
    return value


def offset_seed(seed, offset):
    """The seed of one sublayer: None, or the owner's seed plus ``offset``."""
    return None if seed is None else seed + offset
