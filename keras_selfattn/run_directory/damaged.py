"""A run's damaged files: what reading one raises becomes one line naming the file,
what was wrong with it and what to do (``FILE: damaged (reason); what to do``).

`read_run_file` is the one reader of every file a run reads (backups and their
records, ``data.json``, ``training.json``, splits, vocabularies, checkpoints,
SentencePiece models).
"""

import json
import pathlib
import re

from keras_selfattn.run_directory.layout import (
    DATA_FILE,
    FINISHED_FILE,
    SPLITS_DIR,
    backup_part_epoch,
    checkpoint_step,
)


class RunFileDamaged(ValueError):
    """A run's file that exists but cannot be read: ``FILE: damaged (reason); what
    to do``. (A ValueError: the command line answers it in one line, exit 2.)

    Attributes:
        path: the file.
        reason: what reading it met.
        advice: what to do.
    """

    def __init__(self, path, reason, advice=None):
        self.path = pathlib.Path(path)
        self.reason = reason
        self.advice = advice or damage_advice(path)
        super().__init__(f"{path}: damaged ({reason}); {self.advice}")


class RunPartsMismatch(ValueError):
    """Two parts of a run directory that do not belong together (the message
    names both files and what each says)."""


def damage_advice(path):
    """What to do about the damaged run file ``path`` (by its name)."""
    path = pathlib.Path(path)
    epoch = backup_part_epoch(path)
    if epoch is not None:
        return (
            f"remove {path.parent}/epoch-{epoch:05d}.* to resume from the "
            f"backup before it, or {path.parent.parent} to start the run again"
        )
    if checkpoint_step(path) is not None:
        return "remove it (to average the others) or restore it from a copy"
    if path.name in (DATA_FILE, FINISHED_FILE) or path.parent.name == SPLITS_DIR:
        return (
            "restore it from a copy, or train into a new run directory "
            "(--overwrite starts this one again)"
        )
    return (
        "restore it from a copy, or retrain (the model needs the files it was "
        "trained with)"
    )


def read_run_file(path, read, advice=None):
    """``read(path)``, with what a damaged file raises turned into `RunFileDamaged`.

    A missing file (FileNotFoundError) and a `RunFileDamaged` pass unchanged; an
    error whose message starts with another file's name (a vocabulary that
    ``tokenizer.json`` names) is that file's damage.

    Args:
        path: the file.
        read: a function of the path (``json.loads``-like readers, Keras',
            h5py's, ``PairTokenizer.load``).
        advice: what to do (default: `damage_advice`).

    Raises:
        RunFileDamaged: ``path`` (or the file the error names) is damaged.
    """
    try:
        return read(path)
    except (FileNotFoundError, RunFileDamaged, RunPartsMismatch):
        raise
    except Exception as error:
        damaged, reason = _named_file(path, error)
        raise RunFileDamaged(damaged, reason, advice) from error


def _named_file(path, error):
    """``(file, reason)``: the file an error message starts with, else ``path``."""
    message = " ".join((str(error) or type(error).__name__).split())
    head, _, rest = message.partition(": ")
    name = re.sub(r":\d+$", "", head)
    if rest and name != str(path) and pathlib.Path(name).is_file():
        return name, rest
    if rest and name == str(path):
        message = rest
    message = message.replace(str(path), "the file")
    if not isinstance(error, (ValueError, OSError)):
        message = f"{type(error).__name__}: {message}"
    return path, message[:300]


def read_run_json(path):
    """The JSON in a run's file ``path`` (`read_run_file`: damage named)."""
    return read_run_file(
        path, lambda p: json.loads(pathlib.Path(p).read_text(encoding="utf-8"))
    )
