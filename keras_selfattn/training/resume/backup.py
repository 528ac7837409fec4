"""Per-worker backups of the training state, and restoring them (`train`'s resume).

Keras 3's ``BackupAndRestore`` is not used, for four reasons: it is not
multi-worker aware (two workers sharing one backup directory crash on the HDF5
file lock); it writes the weights and then the epoch number as two files, so a
kill between the two resumes the wrong epoch with the right weights; it does not
restore the position of the input pipeline, so a resumed run trains on other
batches than an uninterrupted one; and it resumes through a private ``Model``
attribute.

Here every worker writes its own directory ``RUN_DIR/backup/worker-<i>/``; each
epoch's state is one ``epoch-<N>.weights.h5`` (model *and* optimizer variables)
and one ``epoch-<N>.json`` (the epoch count, the best score so far, the last
validation's health and the stream's counts), each written under a temporary
name and renamed into place, the JSON last: a backup with both files is
complete. The last two are kept, because a worker can be killed after another
one finished writing the same epoch: the workers then agree on the newest epoch
they all have (`train` gathers every worker's newest epoch) and resume from it
with ``model.fit(initial_epoch=...)``, skipping the batches already trained on.
"""

import json
import pathlib

import keras
import numpy as np

from keras_selfattn.run_directory.atomic import replace_atomically
from keras_selfattn.run_directory.damaged import read_run_file, read_run_json
from keras_selfattn.run_directory.layout import (
    backup_epoch,
    backup_file,
    worker_backup_dir,
)

__all__ = [
    "INPUT_PIPELINE",
    "WorkerBackup",
    "backed_up_epochs",
    "check_backup",
    "input_checkpoint",
    "keep_newest",
    "read_backup",
    "remove_backup",
    "restore_backup",
    "restore_seed_states",
    "seed_states",
    "stopped_early",
    "worker_backup_dir",
]

# The version of the training input's tf.data graph that a backup's input
# checkpoint (``epoch-<N>.input``) holds the iterator of. An iterator checkpoint
# restores only into the graph that wrote it, so a change of that graph's shape
# (its datasets, not the functions they map) gives a new number; a backup of
# another version (or none: the backups written before this number, whose graph
# counted the length check on every pass) is resumed by reading again, and
# skipping, the batches already trained on (`restart.restored_input`).
INPUT_PIPELINE = 2


def backed_up_epochs(directory):
    """The epochs with a complete backup in ``directory``, ascending (empty: none)."""
    directory = pathlib.Path(directory)
    if not directory.is_dir():
        return []
    epochs = []
    for path in directory.iterdir():
        epoch = backup_epoch(path)
        if epoch is not None and backup_file(directory, epoch, "weights").exists():
            epochs.append(epoch)
    return sorted(epochs)


def read_backup(directory, epoch):
    """The JSON state of the backup of ``epoch``.

    ``{"epoch": N, "best": float | None, ...}``.

    Raises:
        RunFileDamaged: the file is not JSON (truncated...).
    """
    return read_run_json(backup_file(directory, epoch, "state"))


def check_backup(directory, epoch):
    """Reads the backup of ``epoch`` without loading it: its JSON state and its
    weights file's HDF5 structure, so that a damaged backup is met before a
    resume changes anything.

    Raises:
        RunFileDamaged: naming the damaged file.
    """
    import h5py  # Keras' own dependency for .weights.h5

    read_backup(directory, epoch)

    def open_weights(path):
        with h5py.File(path, "r") as weights:
            weights.visit(lambda name: None)

    read_run_file(backup_file(directory, epoch, "weights"), open_weights)


def _seed_variables(model):
    return [v for v in model.variables if "seed_generator" in v.path]


def seed_states(model):
    """The states of the model's random-seed generators (dropout), in model order.

    ``model.save_weights`` does not hold them; without them a resumed run with
    dropout on draws other masks than an uninterrupted one. (By position, not by
    path: Keras numbers the generators' names per process.)
    """
    return [[int(x) for x in v.numpy().reshape(-1)] for v in _seed_variables(model)]


def restore_seed_states(model, states):
    """Assigns states saved by `seed_states` back, generator by generator."""
    if states is None:
        return
    variables = _seed_variables(model)
    if len(variables) != len(states):
        raise ValueError(
            f"The backup holds {len(states)} random-generator states but the model "
            f"has {len(variables)}: it was made by another model"
        )
    for v, state in zip(variables, states, strict=True):
        v.assign(np.asarray(state, v.dtype).reshape(v.shape))


def restore_backup(model, directory, epoch):
    """Loads the backup of ``epoch`` into ``model`` (weights and optimizer state).

    Call it in the strategy's scope after ``compile``. Returns the JSON state. A
    damaged file is `RunFileDamaged` (both are read before the
    model's weights change); nothing is written.
    """
    state = read_backup(directory, epoch)
    if model.optimizer is not None and not model.optimizer.built:
        model.optimizer.build(model.trainable_variables)
    read_run_file(backup_file(directory, epoch, "weights"), model.load_weights)
    restore_seed_states(model, state.get("seed_states"))
    return state


def stopped_early(state, patience):
    """Whether a backup's JSON ``state`` was taken where its run stopped early:
    its early-stopping count reached ``patience`` validations without progress
    (`callbacks.early_stopping.EarlyStopping`, which stops at the first one when
    ``patience`` is 0)."""
    return state.get("wait", 0) >= max(patience, 1)


def input_checkpoint(directory, epoch):
    """The prefix of the input-iterator checkpoint of ``epoch``'s backup, or None
    (none written, or one of another `INPUT_PIPELINE`, which cannot restore)."""
    state = read_backup(directory, epoch)
    if not state.get("input") or state.get("input_pipeline") != INPUT_PIPELINE:
        return None
    return pathlib.Path(directory) / state["input"]


class WorkerBackup(keras.callbacks.Callback):
    """Writes this worker's backup at the end of an epoch (of a `StepPlan` period).

    Args:
        directory: this worker's own directory (`worker_backup_dir`).
        monitor: the log whose lowest value is kept as ``best`` (what
            ``ModelCheckpoint(save_best_only=True)`` compares against on resume).
        best: the best value so far, when resuming.
        keep: how many epochs to keep (2: see the module docstring).
        plan: a `step_plan.StepPlan`: back up only when ``plan.backs_up`` says so
            or where the run stops (None: every epoch).
        best_model: a `callbacks.best_model.BestModel` whose ``best`` is saved.
        early_stopping: a `callbacks.early_stopping.EarlyStopping` whose ``wait``
            is saved.
        resumable: a `restart.ResumableInput` whose iterator is saved.
        validation: a `callbacks.validation.Validation` whose last health check
            is saved (``health``).
        counters: the training stream's `text.stream.StreamCounters`, whose
            values are saved (``counts``).

    The health and the counts let a call that resumes with every step done
    (it trains nothing) write the run's summary as the interrupted call had it.
    """

    def __init__(
        self,
        directory,
        monitor="val_loss",
        best=None,
        keep=2,
        plan=None,
        best_model=None,
        early_stopping=None,
        resumable=None,
        validation=None,
        counters=None,
    ):
        super().__init__()
        self.directory = pathlib.Path(directory)
        self.monitor = monitor
        self.best = best
        self.keep = keep
        self.plan = plan
        self.best_model = best_model
        self.early_stopping = early_stopping
        self.resumable = resumable
        self.validation = validation
        self.counters = counters

    def on_epoch_end(self, epoch, logs=None):
        done = epoch + 1
        if self.best_model is not None:
            self.best = self.best_model.best
        else:
            value = (logs or {}).get(self.monitor)
            if value is not None and (self.best is None or float(value) < self.best):
                self.best = float(value)
        # The period where the run stops (early) is backed up too: the same
        # call, interrupted in the final work, then finishes the run there.
        stopping = self.model is not None and self.model.stop_training
        if self.plan is not None and not (self.plan.backs_up(done) or stopping):
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        replace_atomically(
            lambda tmp: self.model.save_weights(tmp, overwrite=True),
            backup_file(self.directory, done, "weights"),
        )
        input_prefix = None
        if self.resumable is not None:
            written = self.resumable.save(backup_file(self.directory, done, "input"))
            input_prefix = pathlib.Path(written).name if written else None
        state = {
            "epoch": done,
            "step": self.plan.step_after(done) if self.plan else None,
            "best": self.best,
            "wait": 0 if self.early_stopping is None else self.early_stopping.wait,
            "monitor": self.monitor,
            "seed_states": seed_states(self.model),
            "input": input_prefix,
            "input_pipeline": INPUT_PIPELINE,
            **self._figures(),
        }
        replace_atomically(
            lambda tmp: tmp.write_text(json.dumps(state) + "\n", encoding="utf-8"),
            backup_file(self.directory, done, "state"),
        )
        keep_newest(
            backed_up_epochs(self.directory),
            self.keep,
            lambda epoch: remove_backup(self.directory, epoch),
        )

    def _figures(self):
        """The last validation's health and the stream's counts, where known."""
        figures = {}
        if self.validation is not None:
            health = self.validation.health
            figures["health"] = None if health is None else health.to_dict()
        if self.counters is not None:
            figures["counts"] = self.counters.values()
        return figures


def keep_newest(saved, keep, remove):
    """The one retention rule of the run's saved states: the newest ``keep`` stay.

    Used by the backups (`WorkerBackup`, two epochs) and the kept checkpoints
    (`kept_checkpoints.KeepCheckpoints`, ``keep_checkpoints`` validations).

    Args:
        saved: what is saved, oldest first (epochs, checkpoint files).
        keep: positive int, how many of the newest to keep.
        remove: called with each one older than those.
    """
    if isinstance(keep, bool) or not isinstance(keep, int) or keep < 1:
        raise ValueError(f"keep must be a positive integer. Received: keep={keep!r}")
    for old in list(saved)[:-keep]:
        remove(old)


def remove_backup(directory, epoch):
    """Removes the backup of ``epoch`` (its JSON first: the epoch stops counting)."""
    directory = pathlib.Path(directory)
    for part in ("state", "weights"):
        backup_file(directory, epoch, part).unlink(missing_ok=True)
    input_prefix = backup_file(directory, epoch, "input")
    for path in directory.glob(input_prefix.name + "*"):
        path.unlink(missing_ok=True)
