"""Whether a run's parts belong together: the vocabulary files, ``tokenizer.json``,
``config.json`` and the model files' own configuration (read from each ``.keras``
archive without building the model), checked before a run is used."""

import json
import pathlib
import zipfile

from keras_selfattn.run_directory.damaged import (
    RunFileDamaged,
    RunPartsMismatch,
    read_run_file,
    read_run_json,
)
from keras_selfattn.run_directory.layout import RunLayout


def _vocabulary_size(path):
    """The tokens of a vocabulary file (one a line), counted without reading it
    as a vocabulary."""
    with open(path, encoding="utf-8", newline="") as handle:
        return handle.read().removesuffix("\n").count("\n") + 1


def model_archive_config(path):
    """The configuration a ``.keras`` archive records (its ``config.json``), read
    without building the model (no Keras, no TensorFlow)."""

    def read(path):
        with zipfile.ZipFile(path) as archive:
            return json.loads(archive.read("config.json"))

    return read_run_file(path, read)


def _vocab_sizes(config):
    """``{"source": n, "target": m}`` from a model's saved configuration (the
    `Seq2Seq` model records its vocabulary sizes), or {} when none is found."""
    stack = [config]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if "source_vocab_size" in item and "target_vocab_size" in item:
                return {
                    side: item[f"{side}_vocab_size"] for side in ("source", "target")
                }
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return {}


def check_run_parts(run_dir, models=None):
    """Checks that the parts of a run directory belong together.

    The vocabulary files against ``tokenizer.json``'s record, and both against the
    vocabulary sizes of the model files (``model.keras``, or ``models`` given:
    e.g. the kept checkpoints ``average`` reads), read from each archive's
    ``config.json`` without building a model. Parts that are not there are not
    checked (their readers say they are missing).

    Raises:
        RunPartsMismatch: two parts disagree (both files and both sizes named).
        RunFileDamaged: a part cannot be read.
    """
    run = RunLayout(run_dir)
    if not run.tokenizer_config.is_file():
        return
    record = read_run_json(run.tokenizer_config)
    sizes = {}
    for side in ("source", "target"):
        entry = record.get(side) if isinstance(record, dict) else None
        if not isinstance(entry, dict) or "vocab_size" not in entry:
            raise RunFileDamaged(run.tokenizer_config, f"no {side} vocab_size")
        vocab = run.root / entry.get("vocab_file", f"{side}_vocab.txt")
        sizes[side] = (entry["vocab_size"], run.tokenizer_config)
        if vocab.is_file():
            count = read_run_file(vocab, _vocabulary_size)
            if count != entry["vocab_size"]:
                raise RunPartsMismatch(
                    f"{vocab} holds {count} tokens, but {run.tokenizer_config} "
                    f"records vocab_size={entry['vocab_size']}: the parts are from "
                    "different runs; restore the run's own files, or retrain"
                )
            sizes[side] = (count, vocab)
    settings = read_run_json(run.config).get("model") if run.config.is_file() else None
    for model in [run.model] if models is None else models:
        if pathlib.Path(model).is_file() and zipfile.is_zipfile(model):
            _check_model_parts(model, sizes, settings, run.config)


# The settings that shape a model's weights: config.json's and the model's must
# agree (lengths and dropout may change when a finished run is trained longer).
_SHAPING_SETTINGS = (
    "num_hiddens",
    "num_heads",
    "num_layers",
    "ffn_hiddens",
    "decoder_units",
    "decoder_layers",
    "rnn_type",
    "embedding_dim",
    "attention_score",
    "attention_heads",
    "tie_embeddings",
    "deep_output_hiddens",
    "position",
)


def _check_model_parts(model, sizes, settings, config_path):
    """``model``'s archive records the vocabulary sizes ``sizes`` gives and the
    shaping settings of config.json's ``settings`` (None: not checked)."""
    archived = model_archive_config(model)
    for side, value in _vocab_sizes(archived).items():
        count, vocab = sizes[side]
        if value != count:
            raise RunPartsMismatch(
                f"{vocab} holds {count} {side} tokens, but {model} was built for "
                f"{value} (its {side} embedding): the vocabulary is not the "
                "model's; use the vocabulary files the model was trained with "
                "(or retrain)"
            )
    inner = archived.get("config", {}) if isinstance(archived, dict) else {}
    model_settings = inner.get("config") if isinstance(inner, dict) else None
    if not isinstance(settings, dict) or not isinstance(model_settings, dict):
        return
    for name in _SHAPING_SETTINGS:
        both = name in settings and name in model_settings
        if both and settings[name] != model_settings[name]:
            raise RunPartsMismatch(
                f"{config_path} records {name}={settings[name]!r}, but {model} "
                f"was built with {name}={model_settings[name]!r}: the parts are "
                "from different runs; restore the run's own files, or retrain"
            )
