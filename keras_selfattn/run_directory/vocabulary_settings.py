"""A vocabulary's settings: the tokenizer fields of `TrainConfig` that a vocabulary
directory (``build-vocab --out``, or a run directory) was built with, read from its
``tokenizer.json`` without TensorFlow."""

import dataclasses
import pathlib

from keras_selfattn.config import TrainConfig
from keras_selfattn.run_directory.damaged import RunFileDamaged, read_run_json
from keras_selfattn.run_directory.layout import TOKENIZER_CONFIG_FILE

# The `TrainConfig` fields a vocabulary fixes, and where tokenizer.json records
# each: (side, key of that side's TokenizerConfig). tokenizer_ops and
# split_digits are one setting for both sides (`tokenizer_configs`).
VOCABULARY_SETTINGS = {
    "source_tokenizer": ("source", "kind"),
    "target_tokenizer": ("target", "kind"),
    "tokenizer_ops": ("source", "ops"),
    "split_digits": ("source", "split_digits"),
    "source_vocab_size": ("source", "max_vocab_size"),
    "target_vocab_size": ("target", "max_vocab_size"),
}


def vocabulary_settings(directory):
    """The `TrainConfig` tokenizer settings (`VOCABULARY_SETTINGS`) that the
    vocabulary in ``directory`` was built with, read from its ``tokenizer.json``
    (without TensorFlow); a setting it does not record is left out.

    Raises:
        FileNotFoundError: ``directory`` has no ``tokenizer.json``.
        RunFileDamaged: it is not JSON, or not a tokenizer description.
    """
    path = pathlib.Path(directory) / TOKENIZER_CONFIG_FILE
    if not path.is_file():
        raise FileNotFoundError(
            f"No {TOKENIZER_CONFIG_FILE} in {directory}: not a vocabulary directory "
            "(keras-selfattn build-vocab --out) or a run directory (--vocab)"
        )
    record = read_run_json(path)
    record = record if isinstance(record, dict) else {}
    sides = {side: record.get(side) for side in ("source", "target")}
    if not all(isinstance(entry, dict) for entry in sides.values()):
        raise RunFileDamaged(path, "no source and target tokenizer")
    return {
        name: sides[side][key]
        for name, (side, key) in VOCABULARY_SETTINGS.items()
        if key in sides[side]
    }


def train_config_with_vocabulary(train_config, directory, given=None):
    """``train_config`` with the tokenizer settings of the vocabulary in
    ``directory`` (`vocabulary_settings`): a run trained on a vocabulary uses
    the tokenizers it was built with, and its ``config.json`` says so.

    Args:
        train_config: a `TrainConfig`.
        directory: the vocabulary (``build-vocab --out``, or a run directory).
        given: the settings asked for, field name -> how they were given (the
            command line: the flags typed, ``{"target_tokenizer":
            "--target-tokenizer word"}``). None: the fields of ``train_config``
            that differ from `TrainConfig`'s defaults.

    Raises:
        ValueError: a setting asked for contradicts the vocabulary; the message
            names how it was given and the vocabulary's value.
    """
    settings = vocabulary_settings(directory)
    if given is None:
        default = TrainConfig()
        given = {
            name: f"train_config.{name}={getattr(train_config, name)!r}"
            for name in settings
            if getattr(train_config, name) != getattr(default, name)
        }
    for name, how in given.items():
        if name in settings and getattr(train_config, name) != settings[name]:
            raise ValueError(
                f"{how} contradicts the vocabulary in {directory}: its "
                f"{TOKENIZER_CONFIG_FILE} records {name}={settings[name]!r}. Leave "
                "it out to use the vocabulary's, or build a vocabulary with it "
                "(keras-selfattn build-vocab)"
            )
    try:
        return dataclasses.replace(train_config, **settings)
    except ValueError as error:
        raise ValueError(
            f"{error} (with the tokenizer settings of the vocabulary in {directory})"
        ) from None
