"""A run's settings, ``config.json``: the `ModelConfig` and `TrainConfig` it was
trained with, as {"model": ..., "train": ...}."""

import dataclasses
import json

from keras_selfattn.config import ModelConfig, TrainConfig
from keras_selfattn.run_directory.atomic import write_text_atomically


def save_run_config(path, model_config: ModelConfig, train_config: TrainConfig):
    """Writes ``config.json`` (atomically): {"model": ..., "train": ...}."""
    payload = {
        "model": dataclasses.asdict(model_config),
        "train": dataclasses.asdict(train_config),
    }
    return write_text_atomically(
        path, json.dumps(payload, indent=2, sort_keys=True) + "\n"
    )


def _read_json(path, what):
    """The JSON object in ``path``; ``what`` says what the file is, for the error.

    Raises:
        ValueError: one line naming the file, when it is not JSON.
    """
    with open(path, encoding="utf-8") as handle:
        try:
            return json.load(handle)
        except ValueError as error:  # JSONDecodeError, UnicodeDecodeError
            raise ValueError(f"{path} is not {what}: {error}") from None


def load_run_config(path):
    """Reads ``config.json`` back into (ModelConfig, TrainConfig).

    A field missing from the file takes the value ``ADDED_LATER`` gives it (the
    classes' ``from_dict``), so a run saved before the field existed reads as it
    was trained.

    Raises:
        ValueError: naming the file, when it is not JSON, lacks the ``"model"`` or
            ``"train"`` object, or holds an unknown or invalid field.
    """
    payload = _read_json(path, "a JSON configuration")
    if not isinstance(payload, dict) or not {"model", "train"} <= set(payload):
        raise ValueError(
            f'{path} must hold a "model" and a "train" object. '
            f"Received keys: {sorted(payload) if isinstance(payload, dict) else None}"
        )
    configs = []
    for key, cls in (("model", ModelConfig), ("train", TrainConfig)):
        source = f'{path} "{key}"'
        try:
            configs.append(cls.from_dict(payload[key], source=source))
        except ValueError as error:
            if str(error).startswith(source):
                raise
            raise ValueError(f"{source}: {error}") from None
    return tuple(configs)
