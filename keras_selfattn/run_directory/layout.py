"""The run directory's layout: every file and folder name, and the paths of a run.

A run directory (``keras-selfattn train --out RUN_DIR``) is written by training and
read by resume, continuation, validation, averaging, translate, evaluate, export and
the benchmarks. This module is the one place that spells its names (those of the
files the library saves into it, its tokenizers' and the shortlist table's, are
`keras_selfattn.file_names`', listed here); the records'
readers and writers sit beside it (`settings`, `metrics`, `history`,
`vocabulary_settings`, `consistency`, `damaged`). It imports only the standard
library, so reading a run never pulls in the trainer.

    RUN_DIR/
        model.keras               MODEL_FILE          the trained model
        model.before-average.keras  REPLACED_MODEL_FILE (kept by ``average``)
        config.json               CONFIG_FILE         {"model": ..., "train": ...}
        data.json                 DATA_FILE           the data record (resume checks it)
        pairs.tsv                 PAIRS_FILE          pairs given in memory, written out
        splits/                   SPLITS_DIR
            validation.tsv        VALIDATION_FILE
            test.tsv              TEST_FILE
            (train.tsv            TRAIN_FILE, read by export's warmup when present)
        history.csv               HISTORY_FILE        a row per period, keyed by step
        metrics.json              METRICS_FILE        the test-split scores
        training.json             FINISHED_FILE       written when training finished
        train.lock                LOCK_FILE           held while a process trains
        tokenizer.json            TOKENIZER_CONFIG_FILE
        source_vocab.txt          SOURCE_VOCAB_FILE
        target_vocab.txt          TARGET_VOCAB_FILE
        source.spm.model          SENTENCEPIECE_MODEL_FILES["source"]
        target.spm.model          SENTENCEPIECE_MODEL_FILES["target"]
        backup/                   BACKUP_DIR
            worker-<i>/           worker_backup_dir(...)
                epoch-<N>.weights.h5, .json, .input  backup_file(...)
        checkpoints/              CHECKPOINTS_DIR
            step-<step>.keras     checkpoint_file(), checkpoint_step()
        plots/                    PLOTS_DIR
            history.png           HISTORY_PLOT_FILE
            positional_encoding.png  POSITIONAL_ENCODING_PLOT_FILE
            attention_<i>.png     ATTENTION_PLOT_FILE.format(i)
        export/                   EXPORT_DIR          <model name>/<version>/
        tensorboard/              TENSORBOARD_DIR     TensorBoard's event files
        shortlist.npz             SHORTLIST_FILE      the vocabulary shortlist table
"""

import pathlib
import re

# The files the library saves into a run (its tokenizers', the shortlist table):
# their names are the library's, listed here among the run's.
from keras_selfattn.file_names import (  # noqa: F401
    SENTENCEPIECE_MODEL_FILES,
    SHORTLIST_FILE,
    SOURCE_VOCAB_FILE,
    TARGET_VOCAB_FILE,
    TOKENIZER_CONFIG_FILE,
)

MODEL_FILE = "model.keras"
REPLACED_MODEL_FILE = "model.before-average.keras"
CONFIG_FILE = "config.json"
DATA_FILE = "data.json"
PAIRS_FILE = "pairs.tsv"
SPLITS_DIR = "splits"
VALIDATION_FILE = "validation.tsv"  # in SPLITS_DIR
TEST_FILE = "test.tsv"  # in SPLITS_DIR
TRAIN_FILE = "train.tsv"  # in SPLITS_DIR: not written by train; read when present
HISTORY_FILE = "history.csv"
METRICS_FILE = "metrics.json"
FINISHED_FILE = "training.json"
LOCK_FILE = "train.lock"
BACKUP_DIR = "backup"
CHECKPOINTS_DIR = "checkpoints"
PLOTS_DIR = "plots"
HISTORY_PLOT_FILE = "history.png"  # in PLOTS_DIR
POSITIONAL_ENCODING_PLOT_FILE = "positional_encoding.png"  # in PLOTS_DIR
ATTENTION_PLOT_FILE = "attention_{}.png"  # in PLOTS_DIR, the test pair's number
EXPORT_DIR = "export"  # EXPORT_DIR/<model name>/<version>: TF Serving's layout
TENSORBOARD_DIR = "tensorboard"  # train's event files: tensorboard --logdir

# A worker's backup files (`backup_file`): the epoch's weights, state and input.
_BACKUP_NAMES = {
    "weights": "epoch-{:05d}.weights.h5",
    "state": "epoch-{:05d}.json",
    "input": "epoch-{:05d}.input",
}
_BACKUP_STATE = re.compile(r"^epoch-(\d{5,})\.json$")
_CHECKPOINT = re.compile(r"step-(\d+)\.keras")
# Any of a backup's files: its weights, its state or its input checkpoint's parts.
_BACKUP_PART = re.compile(r"^epoch-(\d{5,})\.(?:weights\.h5|json|input.*)$")


def worker_backup_dir(backup_root, worker_index):
    """``backup_root/worker-<worker_index>``: one directory per worker."""
    return pathlib.Path(backup_root) / f"worker-{worker_index}"


def backup_file(directory, epoch, part):
    """A worker's backup file of ``epoch``: ``part`` is "weights", "state" or
    "input"."""
    if part not in _BACKUP_NAMES:
        raise ValueError(
            f"part must be one of {sorted(_BACKUP_NAMES)}. Received: part={part!r}"
        )
    return pathlib.Path(directory) / _BACKUP_NAMES[part].format(epoch)


def backup_epoch(path):
    """The epoch of a backup's state file (``epoch-<N>.json``), or None."""
    match = _BACKUP_STATE.match(pathlib.Path(path).name)
    return int(match.group(1)) if match else None


def backup_part_epoch(path):
    """The epoch of any file of a backup (weights, state, input), or None."""
    match = _BACKUP_PART.match(pathlib.Path(path).name)
    return int(match.group(1)) if match else None


def checkpoint_file(directory, step):
    """``directory/step-<step>.keras`` (8 digits): a kept checkpoint."""
    return pathlib.Path(directory) / f"step-{step:08d}.keras"


def checkpoint_step(path):
    """The step of a kept checkpoint's file (``step-<step>.keras``), or None."""
    match = _CHECKPOINT.fullmatch(pathlib.Path(path).name)
    return int(match.group(1)) if match else None


def checkpoint_files(directory):
    """The ``step-<step>.keras`` files in ``directory``, oldest first (by step)."""
    found = [(checkpoint_step(p), p) for p in pathlib.Path(directory).glob("*.keras")]
    return [path for step, path in sorted(f for f in found if f[0] is not None)]


class RunLayout:
    """The paths of one run directory (the names are the module constants).

    Args:
        run_dir: the run directory (str or path; it need not exist).

    Example:

        run = RunLayout("runs/demo")
        run.model            # runs/demo/model.keras
        run.test_split       # runs/demo/splits/test.tsv
        run.worker_backup(0) # runs/demo/backup/worker-0
    """

    def __init__(self, run_dir):
        self.root = pathlib.Path(run_dir)

    def __repr__(self):
        return f"RunLayout({str(self.root)!r})"

    model = property(lambda self: self.root / MODEL_FILE)
    replaced_model = property(lambda self: self.root / REPLACED_MODEL_FILE)
    config = property(lambda self: self.root / CONFIG_FILE)
    data = property(lambda self: self.root / DATA_FILE)
    pairs = property(lambda self: self.root / PAIRS_FILE)
    splits = property(lambda self: self.root / SPLITS_DIR)
    validation_split = property(lambda self: self.splits / VALIDATION_FILE)
    test_split = property(lambda self: self.splits / TEST_FILE)
    history = property(lambda self: self.root / HISTORY_FILE)
    metrics = property(lambda self: self.root / METRICS_FILE)
    finished = property(lambda self: self.root / FINISHED_FILE)
    lock = property(lambda self: self.root / LOCK_FILE)
    tokenizer_config = property(lambda self: self.root / TOKENIZER_CONFIG_FILE)
    backup = property(lambda self: self.root / BACKUP_DIR)
    checkpoints = property(lambda self: self.root / CHECKPOINTS_DIR)
    plots = property(lambda self: self.root / PLOTS_DIR)
    history_plot = property(lambda self: self.plots / HISTORY_PLOT_FILE)
    export = property(lambda self: self.root / EXPORT_DIR)
    shortlist = property(lambda self: self.root / SHORTLIST_FILE)

    def worker_backup(self, worker_index):
        """``backup/worker-<worker_index>``: that worker's backups."""
        return worker_backup_dir(self.backup, worker_index)

    def checkpoint(self, step):
        """``checkpoints/step-<step>.keras``."""
        return checkpoint_file(self.checkpoints, step)
