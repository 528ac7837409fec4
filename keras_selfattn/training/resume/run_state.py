"""What a run directory holds, and what `train` may do with it.

A run directory is **new** (missing or empty), **interrupted** (``config.json``
and ``backup/``: the same call resumes it), **finished** (``training.json`` says
so; its newest backup is kept, to continue it) or **foreign** (anything else, such
as a user's own ``model.keras``). `train` refuses a finished or foreign
directory unless ``overwrite=True``, which empties it first. The lock file of a
running `train` (``train.lock``, `run_lock`) is not part of any state and is
never removed here.
"""

import json
import pathlib
import shutil

from keras_selfattn.run_directory.atomic import write_text_atomically
from keras_selfattn.run_directory.layout import FINISHED_FILE, LOCK_FILE
from keras_selfattn.run_directory.rerun import run_dir_state
from keras_selfattn.training.distribute.distributed import all_workers_values
from keras_selfattn.training.resume.backup import backed_up_epochs, remove_backup

__all__ = [
    "FINISHED_FILE",
    "LOCK_FILE",
    "claim_run_dir",
    "keep_newest_backup",
    "mark_finished",
    "prune_backups",
    "run_dir_state",
]


def claim_run_dir(run_dir, *, overwrite=False):
    """Checks ``run_dir`` for a run and creates it; returns ``(state, created)``.

    Args:
        run_dir: the run directory.
        overwrite: empty a finished or foreign directory instead of refusing.

    Returns:
        ``(state, created)``: `run_dir_state` before (``"new"`` after an
        overwrite) and whether this call created the directory.

    Raises:
        ValueError: ``run_dir`` is empty text, a file, or a finished or foreign
            directory without ``overwrite``.
    """
    if not str(run_dir).strip():
        raise ValueError(
            f"run_dir must name a directory. Received: run_dir={str(run_dir)!r}"
        )
    run_dir = pathlib.Path(run_dir)
    if run_dir.exists() and not run_dir.is_dir():
        raise ValueError(f"run_dir is a file, not a directory. Received: {run_dir}")
    state = run_dir_state(run_dir)
    if state in ("finished", "foreign"):
        if not overwrite:
            what = (
                "a finished run"
                if state == "finished"
                else "files that are not an interrupted run"
            )
            raise ValueError(
                f"{run_dir} holds {what}; choose another run directory, or pass "
                "--overwrite (overwrite=True) to replace it"
            )
        for child in run_dir.iterdir():
            if child.name == LOCK_FILE:
                continue  # held by this process (run_lock), or by nobody
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()
        state = "new"
    created = not run_dir.exists()
    run_dir.mkdir(parents=True, exist_ok=True)
    return state, created


def mark_finished(run_dir, summary):
    """Writes ``training.json`` (atomically): the run is complete, with ``summary``."""
    return write_text_atomically(
        pathlib.Path(run_dir) / FINISHED_FILE,
        json.dumps({"finished": True, **summary}, indent=2) + "\n",
    )


def prune_backups(backup_dir, strategy, role):
    """Keeps only each worker's newest backup, every worker together.

    Done before the run is marked finished (`mark_finished`): a kill in between
    leaves an interrupted run whose newest backup is its last step, which the
    same call resumes without training a step, then finishes. The newest backup
    (weights, optimizer, step, input position) stays: the same `train` with a
    larger ``train_steps`` or ``epochs`` continues from it (`continuation`).
    """
    keep_newest_backup(backup_dir)
    all_workers_values(strategy, 0, role)  # a barrier: every worker pruned its own


def keep_newest_backup(backup_dir):
    """Removes every backup in ``backup_dir`` but the newest complete one."""
    for epoch in backed_up_epochs(backup_dir)[:-1]:
        remove_backup(backup_dir, epoch)
