"""The data of a training run: streamed files, held-out splits, vocabularies, batches.

`prepare_run_data` resolves ``data`` (file patterns, or a list of pairs written
once to ``RUN_DIR/pairs.tsv`` and streamed like any file), finds the validation
and test pairs (``valid_data``/``test_data`` files, else held out by source
fingerprint from a bounded window at the head of the stream,
`text.fingerprint_split`), and records in ``RUN_DIR/data.json`` a fingerprint of
the files (names, sizes, a hash of their first MiB), the split and the counts: a
resumed run reads them back instead of scanning again, and refuses data that
changed. `training_pairs` streams the training pairs;
`run_batches` turns them into batches. Nothing here grows with the corpus.
"""

import dataclasses
import json
import os
import pathlib

import tensorflow as tf

from keras_selfattn import text
from keras_selfattn.config import data_settings
from keras_selfattn.run_directory.atomic import write_text_atomically
from keras_selfattn.run_directory.damaged import read_run_file, read_run_json
from keras_selfattn.run_directory.layout import (
    DATA_FILE,
    PAIRS_FILE,
    SPLITS_DIR,
    TEST_FILE,
    VALIDATION_FILE,
)
from keras_selfattn.text import fingerprint_split, stream
from keras_selfattn.training.resume.data_fingerprint import (
    describe_data_change,
    file_fingerprint,
)

__all__ = [
    "Passes",
    "RunData",
    "data_fingerprint",
    "given_pairs",
    "prepare_run_data",
    "recorded_run_data",
    "training_pairs",
    "training_passes",
]


@dataclasses.dataclass
class RunData:
    """The data side of a run (everything here is bounded in size).

    Attributes:
        files: the training files.
        split: the fingerprint split applied to ``files`` (None: ``files`` are all
            training data).
        validation: the validation pairs.
        test: the test pairs.
        train_pairs: how many training pairs ``files`` hold (None: not counted).
        fingerprint: what `describe_data_change` compares on resume.
    """

    files: list
    split: fingerprint_split.HeldOutSplit | None
    validation: list
    test: list
    train_pairs: int | None
    fingerprint: dict

    def describe(self) -> str:
        """One line for the log: the files, the held-out pairs and their origin."""
        held_out = "held out by source fingerprint"
        if self.split is not None and self.split.window is not None:
            held_out += f" from the first {self.split.window:,} pairs"
        parts = [
            f"{len(pairs)} {name} pairs "
            + (
                f"from --{name}-data"
                if f"{name}_data" in self.fingerprint
                else held_out
            )
            for name, pairs in (("valid", self.validation), ("test", self.test))
        ]
        count = "" if self.train_pairs is None else f"; {self.train_pairs} to train on"
        return f"data: {len(self.files)} file(s); {'; '.join(parts)}{count}"


def _read_bounded(patterns, limit, train_config):
    files = stream.resolve_data_files(patterns)
    pairs = stream.pair_stream(
        files,
        skip_malformed=train_config.skip_malformed,
        strict_columns=train_config.strict_columns,
    )
    result = [
        (s.decode("utf-8"), t.decode("utf-8"))
        for s, t in pairs.take(limit).as_numpy_iterator()
    ]
    return files, result


def _reader(files, train_config):
    def read(counters, repeat):
        return stream.pair_stream(
            files,
            skip_malformed=train_config.skip_malformed,
            strict_columns=train_config.strict_columns,
            counters=counters,
            repeat=repeat,
            seed=train_config.seed,
        )

    return read


def _base_stream(files, train_config, *, repeat=False, counters=None):
    if repeat and counters is not None:
        return _base_passes(files, train_config, counters).concatenate_all()
    read = _reader(files, train_config)
    if not train_config.max_pairs:
        return read(counters, repeat)
    pairs = read(counters, False).take(train_config.max_pairs)
    if repeat:  # the passes after the first count nothing again
        pairs = pairs.concatenate(
            read(None, False).take(train_config.max_pairs).repeat()
        )
    return pairs


@dataclasses.dataclass(frozen=True)
class Passes:
    """An endless training stream as its first pass (the one that counts) and the
    passes after it (`stream.pair_stream_passes`).

    Attributes:
        first: `tf.data.Dataset` of the first pass's ``(source, target)`` pairs.
        later: the passes after it, forever.
    """

    first: tf.data.Dataset
    later: tf.data.Dataset

    def map(self, function):
        """`Passes` of ``function(dataset)`` applied to both."""
        return Passes(function(self.first), function(self.later))

    def concatenate_all(self):
        """The whole stream: ``first`` then ``later``."""
        return self.first.concatenate(self.later)


def _base_passes(files, train_config, counters):
    if not train_config.max_pairs:
        first, later = stream.pair_stream_passes(
            files,
            skip_malformed=train_config.skip_malformed,
            strict_columns=train_config.strict_columns,
            counters=counters,
            seed=train_config.seed,
        )
        return Passes(first, later)
    read = _reader(files, train_config)
    take = train_config.max_pairs
    # the passes after the first count nothing again
    return Passes(
        read(counters, False).take(take), read(None, False).take(take).repeat()
    )


def data_fingerprint(data, train_config, *, valid_data=None, test_data=None):
    """``(files, fingerprint)``: the files of ``data``, what ``data.json`` records.

    ``data`` is file pattern(s); the fingerprint holds every file of ``data``,
    ``valid_data`` and ``test_data`` (`file_fingerprint`) and the data settings
    (`config.data_settings`).
    """
    files = stream.resolve_data_files(data)
    fingerprint = {
        "data": [file_fingerprint(f) for f in files],
        "settings": data_settings(train_config),
    }
    if valid_data is not None:
        valid_files = stream.resolve_data_files(valid_data)
        fingerprint["valid_data"] = [file_fingerprint(f) for f in valid_files]
    if test_data is not None:
        test_files = stream.resolve_data_files(test_data)
        fingerprint["test_data"] = [file_fingerprint(f) for f in test_files]
    return files, fingerprint


def prepare_run_data(data, run_dir, train_config, *, valid_data=None, test_data=None):
    """Resolves the files of a run and its held-out pairs; reuses ``run_dir``'s record.

    Args:
        data: file pattern(s), or a list of ``(source, target)`` pairs (written to
            ``run_dir/pairs.tsv``).
        run_dir: the run directory (its ``data.json`` and ``splits/`` are read
            when they exist and match, written otherwise).
        train_config: the `TrainConfig`.
        valid_data: validation file pattern(s) (None: held out of ``data``).
        test_data: test file pattern(s) (None: held out of ``data``).

    Returns:
        `RunData`.

    Raises:
        ValueError: the data of an interrupted run changed (the message says what).
    """
    run_dir = pathlib.Path(run_dir)
    if given_pairs(data):
        data = str(_write_given_pairs(data, run_dir / PAIRS_FILE))
    files, fingerprint = data_fingerprint(
        data, train_config, valid_data=valid_data, test_data=test_data
    )
    if (run_dir / DATA_FILE).exists():
        return recorded_run_data(
            run_dir,
            files,
            fingerprint,
            valid_given=valid_data is not None,
            test_given=test_data is not None,
        )
    validation, test, scan = _held_out_pairs(files, train_config, valid_data, test_data)
    split = scan.split if scan else None
    if not validation:
        read = f"{scan.pairs} pairs" if split else "the validation data"
        raise ValueError(
            f"No validation pairs in {read} with split={tuple(train_config.split)} "
            f"and max_validation_pairs={train_config.max_validation_pairs}; give "
            "more pairs, a larger split or --valid-data"
        )
    train_pairs = scan.train_pairs if scan else None
    if train_pairs is None and not train_config.train_steps:
        train_pairs = _count_training_pairs(files, split, train_config)
    if not train_pairs and train_pairs is not None:
        raise ValueError(
            f"No training pairs left once {len(validation)} validation and "
            f"{len(test)} test pairs were held out; give more pairs"
        )
    run_data = RunData(files, split, validation, test, train_pairs, fingerprint)
    _write_record(run_dir, run_data)
    return run_data


def given_pairs(data):
    """Whether ``data`` (as `train` takes it) is a list of pairs, not file patterns."""
    return bool(
        not isinstance(data, (str, os.PathLike))
        and (data and not isinstance(data[0], (str, os.PathLike)))
    )


def recorded_run_data(run_dir, files, fingerprint, *, valid_given, test_given):
    """The `RunData` that ``run_dir`` recorded, over ``files``; refuses data whose
    ``fingerprint`` differs from the record."""
    record = read_run_json(run_dir / DATA_FILE)
    change = describe_data_change(record["fingerprint"], fingerprint)
    if change:
        raise ValueError(
            f"{run_dir} holds an interrupted run on other data: {change}. Resume "
            "it with the same data, or choose another run directory (or --overwrite)"
        )
    split_dir = run_dir / SPLITS_DIR
    validation = read_run_file(split_dir / VALIDATION_FILE, text.read_pairs)
    test = _read_optional(split_dir / TEST_FILE)
    split = None
    if record["split"]:
        held_out = ([] if valid_given else validation) + ([] if test_given else test)
        split = fingerprint_split.HeldOutSplit.from_record(
            record["split"], [source for source, _ in held_out]
        )
    return RunData(files, split, validation, test, record["train_pairs"], fingerprint)


def _held_out_pairs(files, train_config, valid_data, test_data):
    """``(validation, test, scan)``: from the files given, else held out of ``files``.

    ``scan`` is the `fingerprint_split.scan_held_out` result (None: both given).
    """
    fractions = list(train_config.split)
    validation = test = None
    if valid_data is not None:
        _, validation = _read_bounded(
            valid_data, train_config.max_validation_pairs, train_config
        )
        fractions[1] = 0.0
    if test_data is not None:
        _, test = _read_bounded(test_data, train_config.max_test_pairs, train_config)
        fractions[2] = 0.0
    if validation is not None and test is not None:
        return validation, test, None
    fractions[0] = 1.0 - fractions[1] - fractions[2]
    scan = fingerprint_split.scan_held_out(
        _base_stream(files, train_config),
        fractions,
        seed=train_config.seed,
        max_validation_pairs=train_config.max_validation_pairs,
        max_test_pairs=train_config.max_test_pairs,
    )
    validation = scan.validation if validation is None else validation
    test = scan.test if test is None else test
    return validation, test, scan


def _count_training_pairs(files, split, train_config):
    """One pass over the training pairs, counting them.

    Epochs need the count (epochs are for corpora small enough to count;
    ``train_steps`` needs none).
    """
    pairs = _base_stream(files, train_config)
    return int(
        (split.train_filter(pairs) if split else pairs).reduce(
            tf.constant(0, tf.int64), lambda n, _: n + 1
        )
    )


def _write_record(run_dir, run_data):
    """Writes ``splits/`` and then ``data.json`` (replaced atomically)."""
    split_dir = run_dir / SPLITS_DIR
    text.write_pairs(split_dir / VALIDATION_FILE, run_data.validation)
    if (
        run_data.test
    ):  # no empty file: readers of splits/ expect pairs in what they find
        text.write_pairs(split_dir / TEST_FILE, run_data.test)
    record = {
        "fingerprint": run_data.fingerprint,
        "split": run_data.split.record() if run_data.split else None,
        "train_pairs": run_data.train_pairs,
        "validation_pairs": len(run_data.validation),
        "test_pairs": len(run_data.test),
    }
    write_text_atomically(run_dir / DATA_FILE, json.dumps(record, indent=2) + "\n")


def _write_given_pairs(pairs, path):
    """Writes a list of pairs to ``path`` unless an interrupted run there has others."""
    fresh = text.write_pairs(path.with_name("tmp-" + path.name), pairs)
    if path.exists() and path.read_bytes() != fresh.read_bytes():
        fresh.unlink()
        raise ValueError(
            f"{path.parent} holds an interrupted run on other data: the pairs given "
            f"differ from those it started with ({path}). Resume it with the same "
            "pairs, or choose another run directory (or --overwrite)"
        )
    os.replace(fresh, path)
    return path


def _read_optional(path):
    if not (path.exists() and path.stat().st_size):
        return []
    return read_run_file(path, text.read_pairs)


def training_pairs(run_data, train_config, *, repeat=False, counters=None):
    """The training ``(source, target)`` strings of a run, in file order."""
    pairs = _base_stream(run_data.files, train_config, repeat=repeat, counters=counters)
    return run_data.split.train_filter(pairs) if run_data.split else pairs


def training_passes(run_data, train_config, counters):
    """``training_pairs(..., repeat=True, counters=counters)`` as `Passes`: the
    first pass, which counts in ``counters``, and the passes after it."""
    passes = _base_passes(run_data.files, train_config, counters)
    return passes.map(run_data.split.train_filter) if run_data.split else passes
