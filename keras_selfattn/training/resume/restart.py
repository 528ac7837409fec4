"""Where a resumed run restarts: the shared backup, the history kept, the input.

A backup (`backup.WorkerBackup`) is numbered by the periods trained. The workers
restart from the newest backup they all have (`agree_on_restart`); the rows of
``history.csv`` after its step are dropped (`truncate_history`), since the restart
trains them again; and the input continues where the backup left it
(`restored_input`): on one replica by restoring the checkpointed ``tf.data``
iterator (`ResumableInput`: no batch read twice), on several by skipping the
batches already trained on (a distributed iterator cannot be checkpointed), as
also from a backup whose iterator checkpoint is of another input graph
(`backup.INPUT_PIPELINE`: a run backed up by an older version).
"""

import tensorflow as tf

from keras_selfattn.run_directory.damaged import read_run_file
from keras_selfattn.run_directory.history import (
    HISTORY_STEP,
    history_with_steps,
    read_history,
    write_history,
)
from keras_selfattn.training.distribute.distributed import all_workers_values
from keras_selfattn.training.resume.backup import (
    backed_up_epochs,
    check_backup,
    input_checkpoint,
)

__all__ = [
    "ResumableInput",
    "agree_on_restart",
    "restored_input",
    "truncate_history",
]


def agree_on_restart(strategy, role, backup_dir):
    """The newest backup (periods trained) that every worker has; 0: a fresh start."""
    newest = all_workers_values(
        strategy, max(backed_up_epochs(backup_dir), default=0), role
    )
    initial_epoch = min(newest)
    if initial_epoch and initial_epoch not in backed_up_epochs(backup_dir):
        raise ValueError(
            f"The workers' backups disagree (newest backups by worker: {newest}) and "
            f"{backup_dir} has no backup {initial_epoch}; remove {backup_dir.parent} "
            "to start the run again."
        )
    if initial_epoch:  # a damaged backup is met before anything is rewritten
        check_backup(backup_dir, initial_epoch)
    return initial_epoch


def restored_input(
    train_ds, counters, backup_dir, initial_epoch, plan, *, checkpointable
):
    """The dataset to give ``fit``, and the `ResumableInput` saving its iterator.

    Args:
        train_ds: the training stream (a function of the seed only).
        counters: the stream's `StreamCounters`, saved and restored with it.
        backup_dir: this worker's backups.
        initial_epoch: the backup restarted from (0: none).
        plan: the `StepPlan`.
        checkpointable: whether the iterator can be checkpointed (one replica).
    """
    if checkpointable:
        resumable = ResumableInput(train_ds, counters.variables())
        restart_point = (
            input_checkpoint(backup_dir, initial_epoch) if initial_epoch else None
        )
        if restart_point is not None or not initial_epoch:
            if restart_point is not None:
                resumable.restore_from(restart_point)
            return resumable.dataset, resumable
        return train_ds.skip(plan.step_after(initial_epoch)), resumable
    # Replayed: the batches already trained on are read again and skipped.
    return train_ds.skip(plan.step_after(initial_epoch)), None


def truncate_history(path, plan, epochs):
    """Keeps the rows of ``history.csv`` up to the step of the first ``epochs``
    periods of ``plan`` (a `StepPlan`); a resumed run redoes the rest.

    The rows of a run written before history was keyed by step (an ``epoch``
    column only) get their steps from ``plan`` (`history_with_steps`),
    so that the rows the resumed run adds line up with them.
    """
    rows = read_history(path)
    if not rows:
        return
    last = plan.step_after(epochs)
    kept = [
        row
        for row in history_with_steps(rows, plan.step_after)
        if str(row[HISTORY_STEP]).isdigit() and int(row[HISTORY_STEP]) <= last
    ]
    write_history(path, kept)


class ResumableInput:
    """Gives ``model.fit`` a dataset whose iterator this object can save and restore.

    ``fit`` makes its iterator with ``iter(dataset)``; the dataset handed to it
    (`dataset`, a `tf.data.Dataset` over the given one's graph, which is left as
    it was) records that iterator, and restores it from a checkpoint first when
    `restore_from` was called. A `tf.data` iterator checkpoint holds its
    position and its buffers (shuffle, prefetch), so restoring costs time in
    proportion to the buffers, not to the steps already trained. Only for a
    single-replica run: a distributed iterator is not checkpointable.

    Args:
        dataset: the training `tf.data.Dataset`.
        state: extra variables saved and restored with the iterator (name -> var).
    """

    def __init__(self, dataset, state=None):
        self.state = dict(state or {})
        self.iterator = None
        self._restore_path = None
        self.dataset = _RecordingDataset(dataset, self)

    def _started(self, iterator):
        """Called with each iterator ``fit`` makes: restored first, then kept."""
        if self._restore_path is not None:
            checkpoint = tf.train.Checkpoint(iterator=iterator, **self.state)
            read_run_file(
                self._restore_path, lambda p: checkpoint.read(p).assert_consumed()
            )
            self._restore_path = None
        self.iterator = iterator

    def restore_from(self, path):
        """The next iterator starts where the checkpoint at ``path`` left off."""
        self._restore_path = str(path)

    def save(self, prefix):
        """Writes the iterator (and `state`) to ``prefix``; returns the path.

        None: ``fit`` has not iterated yet.
        """
        if self.iterator is None:
            return None
        return tf.train.Checkpoint(iterator=self.iterator, **self.state).write(
            str(prefix)
        )


class _RecordingDataset(tf.data.Dataset):
    """The given dataset (the same graph), reporting each iterator it makes.

    A `tf.data.Dataset` subclass, so Keras' ``fit`` takes it as the dataset it is
    (its ``TFDatasetAdapter``); a transformation of it is a plain dataset again.
    """

    def __init__(self, dataset, resumable):
        self._dataset = dataset
        self._resumable = resumable
        super().__init__(dataset._variant_tensor)

    @property
    def element_spec(self):
        return self._dataset.element_spec

    def _inputs(self):
        return [self._dataset]

    def __iter__(self):
        iterator = super().__iter__()
        self._resumable._started(iterator)
        return iterator
