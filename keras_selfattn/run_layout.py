"""The run directory's layout: every file and folder name, and its records' readers.

A run directory (``keras-selfattn train --out RUN_DIR``) is written by training and
read by resume, continuation, validation, averaging, translate, evaluate, export
and the benchmarks. This module is the one place that knows its layout, so that
reading a run never pulls in the trainer: it imports no TensorFlow and no Keras
(only the Keras-free configuration dataclasses) and sits low in the house, below
`keras_selfattn.text`, the training stack, `keras_selfattn.inference`, serving and
the command line (tests/test_import_graph.py keeps it there).

Two ways to name a part, the same names underneath:

- the module constants (``MODEL_FILE``, ``SPLITS_DIR``, ...), file and folder
  *names* relative to the run directory (or to the folder that holds them);
- `RunLayout`, the paths of one run directory
  (``RunLayout(run_dir).model == run_dir / MODEL_FILE``).

The readers of the run's records live here too: `load_run_config` (``config.json``
-> `ModelConfig`, `TrainConfig`, the fields added later filled by the classes'
``from_dict``) on `read_json` (a damaged JSON file -> one ``ValueError`` line
naming it). `read_run_file` is the one reader of every other file a run reads
(backups and their records, ``data.json``, ``training.json``, splits,
vocabularies, checkpoints, SentencePiece models): what a damaged file raises
becomes a `RunFileDamaged` error, ``FILE: damaged (reason); what to do``. And
`check_run_parts` checks the parts against each other (the vocabulary files,
``tokenizer.json``, ``config.json`` and ``model.keras``'s own configuration,
read from the archive without building the model) before a run is used.
A vocabulary directory (``build-vocab --out``, or a run directory) is read
without TensorFlow too: `vocabulary_settings` (``tokenizer.json`` -> the
`TrainConfig` tokenizer fields) and `train_config_with_vocabulary` (a
configuration that takes them, refusing a contradiction asked for).
``history.csv`` has its reader and writer here too (`read_history`,
`append_history`, `write_history`; `history_with_steps` reads the files of runs
written before the rows were keyed by step).

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
"""

import csv
import dataclasses
import json
import math
import os
import pathlib
import re
import zipfile

from keras_selfattn.models.config import ModelConfig
from keras_selfattn.training.config import TrainConfig

__all__ = [
    "ATTENTION_PLOT_FILE",
    "BACKUP_DIR",
    "CHECKPOINTS_DIR",
    "CONFIG_FILE",
    "DATA_FILE",
    "EXPORT_DIR",
    "FINISHED_FILE",
    "HISTORY_FILE",
    "HISTORY_PERIOD",
    "HISTORY_PLOT_FILE",
    "HISTORY_STEP",
    "LOCK_FILE",
    "METRICS_FILE",
    "MODEL_FILE",
    "PAIRS_FILE",
    "PLOTS_DIR",
    "POSITIONAL_ENCODING_PLOT_FILE",
    "REPLACED_MODEL_FILE",
    "SENTENCEPIECE_MODEL_FILES",
    "SOURCE_VOCAB_FILE",
    "SPLITS_DIR",
    "TARGET_VOCAB_FILE",
    "TENSORBOARD_DIR",
    "TEST_FILE",
    "TOKENIZER_CONFIG_FILE",
    "TRAIN_FILE",
    "VALIDATION_FILE",
    "VOCABULARY_SETTINGS",
    "RunFileDamaged",
    "RunLayout",
    "RunPartsMismatch",
    "append_history",
    "backup_epoch",
    "backup_file",
    "check_run_parts",
    "checkpoint_file",
    "checkpoint_files",
    "checkpoint_step",
    "history_columns",
    "history_with_steps",
    "load_run_config",
    "read_history",
    "read_json",
    "read_run_file",
    "read_run_json",
    "save_run_config",
    "train_config_with_vocabulary",
    "vocabulary_settings",
    "worker_backup_dir",
    "write_history",
    "write_metrics",
]

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
HISTORY_STEP = "step"  # history.csv's key and first column: the steps trained
# Keras' period (its "epoch") from 0, the key of the files written before the step
HISTORY_PERIOD = "epoch"
METRICS_FILE = "metrics.json"
FINISHED_FILE = "training.json"
LOCK_FILE = "train.lock"
TOKENIZER_CONFIG_FILE = "tokenizer.json"
SOURCE_VOCAB_FILE = "source_vocab.txt"
TARGET_VOCAB_FILE = "target_vocab.txt"
SENTENCEPIECE_MODEL_FILES = {"source": "source.spm.model", "target": "target.spm.model"}
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

    def worker_backup(self, worker_index):
        """``backup/worker-<worker_index>``: that worker's backups."""
        return worker_backup_dir(self.backup, worker_index)

    def checkpoint(self, step):
        """``checkpoints/step-<step>.keras``."""
        return checkpoint_file(self.checkpoints, step)


def read_json(path, what):
    """The JSON object in ``path``; ``what`` says what the file is, for the error.

    Raises:
        ValueError: one line naming the file, when it is not JSON.
    """
    with open(path, encoding="utf-8") as handle:
        try:
            return json.load(handle)
        except ValueError as error:  # JSONDecodeError, UnicodeDecodeError
            raise ValueError(f"{path} is not {what}: {error}") from None


def save_run_config(path, model_config: ModelConfig, train_config: TrainConfig):
    """Writes ``config.json``: {"model": ..., "train": ...}."""
    payload = {
        "model": dataclasses.asdict(model_config),
        "train": dataclasses.asdict(train_config),
    }
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(payload, handle, indent=2, sort_keys=True)
        handle.write("\n")


def load_run_config(path):
    """Reads ``config.json`` back into (ModelConfig, TrainConfig).

    A field missing from the file takes the value ``ADDED_LATER`` gives it (the
    classes' ``from_dict``), so a run saved before the field existed reads as it
    was trained.

    Raises:
        ValueError: naming the file, when it is not JSON, lacks the ``"model"`` or
            ``"train"`` object, or holds an unknown or invalid field.
    """
    payload = read_json(path, "a JSON configuration")
    if not isinstance(payload, dict) or not {"model", "train"} <= set(payload):
        raise ValueError(
            f'{path} must hold a "model" and a "train" object. '
            f"Received keys: {sorted(payload) if isinstance(payload, dict) else None}"
        )
    configs = []
    for key, cls in (("model", ModelConfig), ("train", TrainConfig)):
        source = f'{path} "{key}"'
        try:
            configs.append(cls.from_dict(payload[key], source=source))
        except ValueError as error:
            if str(error).startswith(source):
                raise
            raise ValueError(f"{source}: {error}") from None
    return tuple(configs)


def write_metrics(run_dir, metrics):
    """Writes ``metrics.json`` (the test-split scores) in the run directory."""
    path = pathlib.Path(run_dir) / METRICS_FILE
    path.write_text(
        json.dumps(metrics, indent=2, sort_keys=True) + "\n", encoding="utf-8"
    )
    return path


def read_history(path):
    """The rows of ``history.csv`` (dicts of strings), oldest first; [] without it.

    A run written before the rows were keyed by step has no ``step`` column
    (its rows are keyed by ``epoch``, Keras' period from 0): `history_with_steps`
    adds it.

    Raises:
        RunFileDamaged: the file is not CSV text.
    """
    path = pathlib.Path(path)
    if not path.exists():
        return []

    def read(name):
        with open(name, newline="", encoding="utf-8") as handle:
            return list(csv.DictReader(handle))

    return read_run_file(path, read)


def history_with_steps(rows, step_after):
    """``rows`` with a ``step`` in each: the rows of a run written before history
    was keyed by step get ``step_after(epoch + 1)`` (the run's
    ``StepPlan.step_after``); a row with neither a step nor an epoch number gets
    an empty step. The rows are copied, not changed."""
    kept = []
    for row in rows:
        row = dict(row)
        if not row.get(HISTORY_STEP):
            epoch = row.get(HISTORY_PERIOD) or ""
            row[HISTORY_STEP] = step_after(int(epoch) + 1) if epoch.isdigit() else ""
        kept.append(row)
    return kept


def write_history(path, rows):
    """Writes ``rows`` (dicts) as ``history.csv``, atomically (a temporary file
    renamed onto it): the columns ``step``, ``epoch``, then the others sorted;
    a cell a row lacks stays empty."""
    path = pathlib.Path(path)
    names = set().union(*rows) if rows else set()
    keys = [name for name in (HISTORY_STEP, HISTORY_PERIOD) if name in names]
    header = keys + sorted(names - set(keys))
    tmp = path.with_name(f"tmp-{path.name}")
    with open(tmp, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(
            handle, fieldnames=header, restval="", lineterminator="\n"
        )
        writer.writeheader()
        writer.writerows(rows)
    os.replace(tmp, path)
    return path


def append_history(path, row):
    """Adds ``row`` (a dict) to ``history.csv`` (created if absent; rewritten whole
    by `write_history`, so a column the file lacks is added to every row)."""
    return write_history(path, [*read_history(path), row])


def history_columns(rows):
    """The numeric columns of history rows: name -> list of floats (an empty cell
    is NaN); text columns (the validation examples) are left out."""
    columns = {}
    for name in rows[0] if rows else ():
        try:
            columns[name] = [float(row.get(name) or math.nan) for row in rows]
        except ValueError:
            continue
    return columns


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
    epoch = _BACKUP_PART.match(path.name)
    if epoch:
        return (
            f"remove {path.parent}/epoch-{epoch.group(1)}.* to resume from the "
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


_BACKUP_PART = re.compile(r"^epoch-(\d{5,})\.(?:weights\.h5|json|input.*)$")


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
