"""Checkpoint averaging: the last validations' weights, averaged into one model.

Averaging the parameters of the last few checkpoints of a run (Vaswani et al.
2017 average the last 5 or 20; Chen et al. 2018 do so for RNMT+) smooths the
noise of the last updates, often for a BLEU point or more, at no training cost.

- `training.callbacks.kept_checkpoints.KeepCheckpoints`, a callback `train`
  adds when ``keep_checkpoints`` > 0, keeps the checkpoints averaged here.
- `average_checkpoints`: averages ``.keras`` files of one architecture into a
  new ``.keras`` file, one file in memory at a time (the sum and the model being
  read), written atomically.
- `average_run` (``keras-selfattn average --model RUN_DIR``): a run's kept
  checkpoints averaged into its ``model.keras`` (the trained model is kept as
  ``model.before-average.keras``, once: a second average replaces the first),
  or into another file.

The weights' moving average during training (``--ema-momentum``), a different
idea, is `training.moving_average`.
"""

import pathlib
import shutil
import zipfile

import numpy as np

from keras_selfattn.models import saving
from keras_selfattn.run_directory.atomic import replace_atomically
from keras_selfattn.run_directory.consistency import check_run_parts
from keras_selfattn.run_directory.damaged import RunFileDamaged, read_run_file
from keras_selfattn.run_directory.layout import (
    CHECKPOINTS_DIR,
    MODEL_FILE,
    REPLACED_MODEL_FILE,
    RunLayout,
    checkpoint_files,
    checkpoint_step,
)
from keras_selfattn.training.resume.run_lock import RunLock

__all__ = [
    "CHECKPOINTS_DIR",
    "average_checkpoints",
    "average_run",
    "checkpoint_step",
    "kept_checkpoints",
]


def kept_checkpoints(run_dir):
    """The checkpoints kept in ``run_dir/checkpoints``, oldest first (by step)."""
    return checkpoint_files(RunLayout(run_dir).checkpoints)


def _load(path):
    """The model in ``path``; a file Keras cannot read is `RunFileDamaged`."""
    if pathlib.Path(path).is_file() and not zipfile.is_zipfile(path):
        # (Keras calls a truncated archive "File not found".)
        raise RunFileDamaged(path, "not a .keras archive: truncated or corrupt")
    return read_run_file(
        path, lambda p: saving.load_model(p, compile=False, safe_mode=True)
    )


def average_checkpoints(paths, out_path):
    """Averages the weights of ``.keras`` model files into ``out_path``.

    Every weight (trainable or not) of the result is the mean of that weight
    over the files; everything else (architecture, configuration) is the first
    file's. The files are read one at a time: memory holds one model and the
    running sums, whatever the number of files.

    Args:
        paths: two or more ``.keras`` files of one architecture (the same
            weights, by name and shape), e.g. `kept_checkpoints(run_dir)`.
        out_path: the ``.keras`` file to write (atomically: a failure leaves
            what was there).

    Returns:
        ``out_path`` as a `pathlib.Path`.

    Raises:
        ValueError: fewer than two files, a file Keras cannot read, or one whose
            weights differ from the first file's (naming the file and weight).
    """
    paths = [pathlib.Path(path) for path in paths]
    if len(paths) < 2:
        raise ValueError(
            "average_checkpoints needs at least two model files. "
            f"Received: paths={[str(p) for p in paths]}"
        )
    model = _load(paths[0])
    names = [weight.path for weight in model.weights]
    sums = [np.asarray(weight.numpy(), np.float64) for weight in model.weights]
    for path in paths[1:]:
        other = _load(path)
        weights = {weight.path: weight for weight in other.weights}
        if sorted(weights) != sorted(names):
            missing = sorted(set(names) ^ set(weights))
            raise ValueError(
                f"{str(path)!r} is not the architecture of {str(paths[0])!r}: "
                f"the weights {missing[:5]} are in one file only"
            )
        for i, name in enumerate(names):
            value = weights[name].numpy()
            if value.shape != sums[i].shape:
                raise ValueError(
                    f"{str(path)!r} is not the architecture of {str(paths[0])!r}: "
                    f"weight {name!r} has shape {value.shape}, not {sums[i].shape}"
                )
            sums[i] += value
        del other
    for weight, total in zip(model.weights, sums):
        weight.assign((total / len(paths)).astype(weight.dtype))
    return replace_atomically(model.save, pathlib.Path(out_path))


def average_run(run_dir, last=None, out=None):
    """Averages a run's kept checkpoints (``train --keep-checkpoints N``).

    Args:
        run_dir: the run directory.
        last: average the newest ``last`` checkpoints (>= 2); None: all kept.
        out: the ``.keras`` file to write; None: the run's ``model.keras``, the
            model it held copied to ``model.before-average.keras`` first (so that
            ``evaluate``, ``translate`` and ``export`` use the average). The
            trained model is kept there however often this runs: when
            ``model.before-average.keras`` exists, ``model.keras`` holds an
            earlier average and is replaced. The run's lock is held while it is
            written (`run_lock`): a `train` still writing the run refuses it.

    Returns:
        ``(out_path, averaged)``: the file written and the checkpoints averaged.

    Raises:
        ValueError: fewer than two checkpoints kept (or asked for).
        RunPartsMismatch: a checkpoint is not of the run's vocabularies.
        RunFileDamaged: a checkpoint Keras cannot read.
        RunDirBusy: another process (a `train`) holds the run's lock.
    """
    run_dir = pathlib.Path(run_dir)
    if out is not None:
        kept = _checkpoints_to_average(run_dir, last)
        return average_checkpoints(kept, out), kept
    with RunLock.acquire(run_dir):  # a `train` holding the run is not overwritten
        kept = _checkpoints_to_average(run_dir, last)
        return _average_into_run(run_dir, kept), kept


def _checkpoints_to_average(run_dir, last):
    """The newest ``last`` (all: None) kept checkpoints, two or more, of the run's
    vocabularies."""
    kept = kept_checkpoints(run_dir)
    if last is not None:
        if isinstance(last, bool) or not isinstance(last, int) or last < 2:
            raise ValueError(f"last must be an integer >= 2. Received: last={last!r}")
        kept = kept[-last:]
    if len(kept) < 2:
        raise ValueError(
            f"{str(run_dir / CHECKPOINTS_DIR)!r} holds {len(kept)} checkpoint(s); "
            "averaging needs two or more: train with --keep-checkpoints N (N >= 2)"
        )
    check_run_parts(run_dir, models=[run_dir / MODEL_FILE, *kept])
    return kept


def _average_into_run(run_dir, kept):
    """Writes the average of ``kept`` to the run's ``model.keras``, the model it
    replaces kept once in ``model.before-average.keras``. ``model.keras`` is
    always a whole model: a reader (translate, export) meets the old one or the
    average."""
    model_path = run_dir / MODEL_FILE
    averaged = average_checkpoints(kept, run_dir / f"averaged-{model_path.name}")
    replaced = run_dir / REPLACED_MODEL_FILE
    # The trained model is kept once: a second average replaces the first one,
    # never the model that training wrote.
    if model_path.exists() and not replaced.exists():
        replace_atomically(lambda tmp: shutil.copyfile(model_path, tmp), replaced)
    averaged.replace(model_path)
    return model_path
