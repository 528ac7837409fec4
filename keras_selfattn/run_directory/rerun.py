"""What a run directory remembers for the next `train` on it: its state, the
settings it was trained with (``config.json``) and its data (``data.json``).

``keras-selfattn train --out RUN_DIR`` alone resumes an interrupted run, or
continues a finished one, with the settings stored in ``RUN_DIR``: a setting
left out is the run's own, not the default. A setting given that differs from
the stored one is applied where changing it is meaningful (`may_change`) and
refused otherwise, in one line naming how it was given, the stored value and
the value received (`rerun_configs`).

- Any run: where and how it reports (`config.PLACEMENT_FIELDS`: ``log_every``,
  ``tensorboard``, ``threads``, ``strategy``, ``tpu``, ``worker_timeout``).
- A finished run, also: how long it trains and its cadence
  (`config.CONTINUATION_FIELDS`: ``epochs``, ``train_steps``, ``eval_every``,
  ``save_every``, ``patience``); the continuation checks the rest (a larger total,
  a period that ends at its last backup).
- Never: the model's shape, the tokenizers and vocabularies, the data and its
  split, the seed, the optimizer.

Standard library and the configurations only: the command line reads this
before Keras loads.
"""

import dataclasses
import pathlib
from typing import NamedTuple

from keras_selfattn.config import (
    CONTINUATION_FIELDS,
    PLACEMENT_FIELDS,
    ModelConfig,
    TrainConfig,
)
from keras_selfattn.run_directory.damaged import read_run_json
from keras_selfattn.run_directory.layout import (
    BACKUP_DIR,
    CONFIG_FILE,
    DATA_FILE,
    FINISHED_FILE,
    LOCK_FILE,
)
from keras_selfattn.run_directory.settings import load_run_config

__all__ = ["StoredRun", "may_change", "rerun_configs", "run_dir_state", "stored_run"]


def run_dir_state(run_dir) -> str:
    """``"new"`` (missing or empty), ``"interrupted"`` (``config.json`` and
    ``backup/``), ``"finished"`` (``training.json``) or ``"foreign"`` (anything
    else). The lock file of a running `train` counts for nothing."""
    run_dir = pathlib.Path(run_dir)
    if not run_dir.exists() or not any(
        child.name != LOCK_FILE for child in run_dir.iterdir()
    ):
        return "new"
    if (run_dir / FINISHED_FILE).exists():
        return "finished"
    if (run_dir / CONFIG_FILE).exists() and (run_dir / BACKUP_DIR).is_dir():
        return "interrupted"
    return "foreign"


def may_change(state):
    """The `TrainConfig` fields a rerun on a run in ``state`` ("interrupted",
    "finished") may give another value: the placement fields, and for a finished
    run the continuation fields too."""
    if state == "finished":
        return PLACEMENT_FIELDS + CONTINUATION_FIELDS
    return PLACEMENT_FIELDS


class StoredRun(NamedTuple):
    """What a run directory remembers (`stored_run`).

    Attributes:
        run_dir: the run directory.
        state: "interrupted" or "finished".
        model_config: the `ModelConfig` of its ``config.json``.
        train_config: the `TrainConfig` of its ``config.json``.
        data: the training files ``data.json`` records.
        valid_data: the validation files it records (None: held out of ``data``).
        test_data: the test files it records (None: held out of ``data``).
    """

    run_dir: pathlib.Path
    state: str
    model_config: ModelConfig
    train_config: TrainConfig
    data: list
    valid_data: list | None
    test_data: list | None


def stored_run(run_dir):
    """The `StoredRun` of ``run_dir``, or None when it holds no interrupted or
    finished run with its ``data.json`` (a run that stopped before recording its
    data starts again: nothing of it is kept).

    Raises:
        ValueError: ``config.json`` or ``data.json`` is damaged (one line naming it).
    """
    run_dir = pathlib.Path(run_dir)
    if not run_dir.is_dir():  # new, or a file (`train` refuses it by name)
        return None
    state = run_dir_state(run_dir)
    if state not in ("interrupted", "finished") or not (run_dir / DATA_FILE).exists():
        return None
    model_config, train_config = load_run_config(run_dir / CONFIG_FILE)
    fingerprint = read_run_json(run_dir / DATA_FILE).get("fingerprint") or {}

    def files(role):
        entries = fingerprint.get(role)
        return None if entries is None else [entry["file"] for entry in entries]

    return StoredRun(
        run_dir,
        state,
        model_config,
        train_config,
        files("data") or [],
        files("valid_data"),
        files("test_data"),
    )


def rerun_configs(stored, given_model, given_train):
    """The ``(ModelConfig, TrainConfig, changes)`` a rerun on ``stored`` trains
    with: its stored settings, with the ``given`` ones that `may_change` applied.

    Args:
        stored: a `StoredRun`.
        given_model: the `ModelConfig` settings given, field name -> ``(how,
            value)``; ``how`` says how it was given (``"--num-hiddens 32"``).
        given_train: the same for `TrainConfig`.

    Returns:
        The configurations, and the changes applied (``"name old -> new"``).

    Raises:
        ValueError: a setting given contradicts a stored one that may not change:
            one line naming how it was given, the stored value and the one received.
    """
    changes = {}
    for config, given, changeable in (
        (stored.model_config, given_model, ()),
        (stored.train_config, given_train, may_change(stored.state)),
    ):
        changes[type(config)] = {}
        for name, (how, value) in given.items():
            recorded = getattr(config, name)
            if value == recorded:
                continue
            if name not in changeable:
                raise ValueError(_contradiction(stored, name, how, recorded, value))
            changes[type(config)][name] = value
    applied = [
        f"{name} {getattr(config, name)!r} -> {value!r}"
        for config in (stored.model_config, stored.train_config)
        for name, value in changes[type(config)].items()
    ]
    return (
        dataclasses.replace(stored.model_config, **changes[ModelConfig]),
        dataclasses.replace(stored.train_config, **changes[TrainConfig]),
        applied,
    )


def _contradiction(stored, name, how, recorded, value):
    """The one line refusing ``how`` (a setting that may not change)."""
    line = (
        f"{how} contradicts the {stored.state} run in {stored.run_dir}: its "
        f"{CONFIG_FILE} records {name}={recorded!r}, this call received {value!r}"
    )
    if stored.state == "interrupted" and name in CONTINUATION_FIELDS:
        return (
            f"{line}; resume it first with the same settings (train --out "
            f"{stored.run_dir}), then continue the finished run with the new value"
        )
    return (
        f"{line}; leave it out to keep the run's, or train a new run in another "
        "--out (--overwrite replaces this one)"
    )
