"""Per-worker backups of the training state, and restoring them: fault tolerance for `train`.

Keras 3's ``BackupAndRestore`` is not used, for four reasons: it is not
multi-worker aware (two workers sharing one backup directory crash on the HDF5
file lock); it writes the weights and then the epoch number as two files, so a
kill between the two resumes the wrong epoch with the right weights; it does not
restore the position of the input pipeline, so a resumed run trains on other
batches than an uninterrupted one; and it resumes through a private ``Model``
attribute.

Here every worker writes its own directory ``RUN_DIR/backup/worker-<i>/``; each
epoch's state is one ``epoch-<N>.weights.h5`` (model *and* optimizer variables)
and one ``epoch-<N>.json`` (the epoch count and the best validation loss so far),
each written under a temporary name and renamed into place, the JSON last: a
backup with both files is complete. The last two are kept, because a worker can
be killed after another one finished writing the same epoch: the workers then
agree on the newest epoch they all have (`train` gathers every worker's newest
epoch) and resume from it with ``model.fit(initial_epoch=...)``, skipping the
batches already trained on.
"""

import json
import os
import pathlib
import re

import keras

__all__ = [
    "WorkerBackup",
    "backed_up_epochs",
    "read_backup",
    "restore_backup",
    "worker_backup_dir",
]

_WEIGHTS = "epoch-{:05d}.weights.h5"
_STATE = "epoch-{:05d}.json"
_STATE_PATTERN = re.compile(r"^epoch-(\d{5,})\.json$")


def worker_backup_dir(backup_root, worker_index):
    """``backup_root/worker-<worker_index>``: one directory per worker."""
    return pathlib.Path(backup_root) / f"worker-{worker_index}"


def backed_up_epochs(directory):
    """The epoch counts with a complete backup in ``directory``, ascending (empty if none)."""
    directory = pathlib.Path(directory)
    if not directory.is_dir():
        return []
    epochs = []
    for path in directory.iterdir():
        match = _STATE_PATTERN.match(path.name)
        if match and (directory / _WEIGHTS.format(int(match.group(1)))).exists():
            epochs.append(int(match.group(1)))
    return sorted(epochs)


def read_backup(directory, epoch):
    """The JSON state of the backup of ``epoch``: ``{"epoch": N, "best": float | None, ...}``."""
    with open(
        pathlib.Path(directory) / _STATE.format(epoch), encoding="utf-8"
    ) as handle:
        return json.load(handle)


def restore_backup(model, directory, epoch):
    """Loads the backup of ``epoch`` into ``model`` (weights and optimizer state).

    Call it in the strategy's scope after ``compile``. Returns the JSON state.
    """
    if model.optimizer is not None and not model.optimizer.built:
        model.optimizer.build(model.trainable_variables)
    model.load_weights(pathlib.Path(directory) / _WEIGHTS.format(epoch))
    return read_backup(directory, epoch)


def _replace_atomically(write, path):
    """Runs ``write(tmp_path)`` then renames the file to ``path`` (same directory: atomic)."""
    tmp = path.with_name("tmp-" + path.name)
    write(tmp)
    os.replace(tmp, path)


class WorkerBackup(keras.callbacks.Callback):
    """Writes this worker's backup at the end of every epoch.

    Args:
        directory: this worker's own directory (`worker_backup_dir`).
        monitor: the log whose lowest value is kept as ``best`` (what
            ``ModelCheckpoint(save_best_only=True)`` compares against on resume).
        best: the best value so far, when resuming.
        keep: how many epochs to keep (2: see the module docstring).
    """

    def __init__(self, directory, monitor="val_loss", best=None, keep=2):
        super().__init__()
        self.directory = pathlib.Path(directory)
        self.monitor = monitor
        self.best = best
        self.keep = keep

    def on_epoch_end(self, epoch, logs=None):
        value = (logs or {}).get(self.monitor)
        if value is not None and (self.best is None or float(value) < self.best):
            self.best = float(value)
        done = epoch + 1
        self.directory.mkdir(parents=True, exist_ok=True)
        _replace_atomically(
            lambda tmp: self.model.save_weights(tmp, overwrite=True),
            self.directory / _WEIGHTS.format(done),
        )
        state = {"epoch": done, "best": self.best, "monitor": self.monitor}
        _replace_atomically(
            lambda tmp: tmp.write_text(json.dumps(state) + "\n", encoding="utf-8"),
            self.directory / _STATE.format(done),
        )
        for old in backed_up_epochs(self.directory)[: -self.keep]:
            for name in (
                _STATE.format(old),
                _WEIGHTS.format(old),
            ):  # the JSON first: the epoch stops counting
                (self.directory / name).unlink(missing_ok=True)
