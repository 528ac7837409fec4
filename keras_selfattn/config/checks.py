"""Checks of the configuration dataclasses' fields, in Keras' error form.

`ModelConfig` and `TrainConfig` call these from ``__post_init__``, so a bad value
is refused where it enters: from Python, from the command line and from a run
directory's ``config.json`` alike. The messages name the field and the value:
``ValueError("epochs must be an integer >= 1. Received: epochs=0")``.
"""

import dataclasses
import math
import types
import typing

# What each annotation accepts (bool is an int to Python, but not here).
_KINDS = {
    int: ((int,), "an integer"),
    float: ((int, float), "a number"),
    bool: ((bool,), "true or false"),
    str: ((str,), "a string"),
    tuple: ((tuple, list), "a list"),
    list: ((tuple, list), "a list"),
}


def _accepted(annotation):
    """(types, description) an annotation accepts, or None when not checked here."""
    if annotation in _KINDS:
        return _KINDS[annotation]
    origin = typing.get_origin(annotation)
    if origin in (tuple, list):
        return _KINDS[origin]
    if origin in (typing.Union, types.UnionType):
        kinds, words = [], []
        for arg in typing.get_args(annotation):
            if arg is type(None):
                kinds.append(type(None))
                words.append("None")
                continue
            accepted = _accepted(arg)
            if accepted is None:
                return None
            kinds.extend(accepted[0])
            words.append(accepted[1])
        return tuple(kinds), " or ".join(words)
    return None


def check_field_types(config):
    """Each field holds a value of its annotated type; numbers are finite.

    Raises:
        ValueError: naming the field and the value received.
    """
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        accepted = _accepted(field.type)
        if accepted is None:
            continue
        kinds, words = accepted
        wrong_bool = isinstance(value, bool) and bool not in kinds
        if wrong_bool or not isinstance(value, kinds):
            raise ValueError(
                f"{field.name} must be {words}. Received: {field.name}={value!r}"
            )
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(
                f"{field.name} must be a finite number. "
                f"Received: {field.name}={value!r}"
            )


def check_range(config, name, minimum=None, maximum=None, above=None, below=None):
    """``getattr(config, name)`` lies in the bounds given (None values pass).

    Args:
        config: the dataclass instance.
        name: the field.
        minimum, maximum: inclusive bounds.
        above, below: exclusive bounds.

    Raises:
        ValueError: naming the field, the bounds and the value received.
    """
    value = getattr(config, name)
    if value is None:
        return
    bounds = []
    if minimum is not None:
        bounds.append((value >= minimum, f">= {minimum}"))
    if above is not None:
        bounds.append((value > above, f"> {above}"))
    if maximum is not None:
        bounds.append((value <= maximum, f"<= {maximum}"))
    if below is not None:
        bounds.append((value < below, f"< {below}"))
    if not all(ok for ok, _ in bounds):
        kind = "an integer" if isinstance(value, int) else "a number"
        wanted = " and ".join(text for _, text in bounds)
        raise ValueError(f"{name} must be {kind} {wanted}. Received: {name}={value!r}")


def check_choices(config):
    """Each field listed in ``config.CHOICES`` holds one of its allowed values."""
    for name, allowed in config.CHOICES.items():
        value = getattr(config, name)
        if value not in allowed:
            raise ValueError(
                f"{name} must be one of {allowed}. Received: {name}={value!r}"
            )


def check_known_keys(cls, values, source):
    """``values`` (a dict read from ``source``) holds only fields of ``cls``.

    A field it lacks takes its default: configurations saved before the field
    existed still load.

    Raises:
        ValueError: naming ``source`` and the unknown keys.
    """
    if not isinstance(values, dict):  # bad file content: a ValueError like the rest
        raise ValueError(  # noqa: TRY004
            f"{source}: expected an object of {cls.__name__} fields. "
            f"Received: {values!r:.80}"
        )
    known = {field.name for field in dataclasses.fields(cls)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ValueError(
            f"{source}: unknown {cls.__name__} fields {unknown}. Known: {sorted(known)}"
        )


__all__ = ["check_choices", "check_field_types", "check_known_keys", "check_range"]
