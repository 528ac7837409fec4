"""The data of a training run: streamed files, held-out splits, vocabularies, batches.

`prepare_run_data` resolves ``data`` (file patterns, or a list of pairs written
once to ``RUN_DIR/pairs.tsv`` and streamed like any file), finds the validation
and test pairs (``valid_data``/``test_data`` files, else one pass splitting by
source fingerprint, `text.fingerprint_split`), and records in ``RUN_DIR/data.json``
a fingerprint of the files (names, sizes, a hash of their first MiB), the
thresholds and the counts: a resumed run reads them back instead of scanning
again, and refuses data that changed. `training_stream` and `validation_batches`
build the ``tf.data`` pipelines; nothing in them grows with the corpus.
"""

import dataclasses
import hashlib
import json
import os
import pathlib

import tensorflow as tf

from keras_selfattn import text
from keras_selfattn.text import fingerprint_split, stream
from keras_selfattn.text.dataset import (
    batch_by_length,
    encode_within_limits,
)

__all__ = [
    "DATA_FILE",
    "PAIRS_FILE",
    "RunData",
    "auto_shard_policy",
    "first_pass_fits",
    "prepare_run_data",
    "shuffled_batches",
    "training_pairs",
    "training_stream",
    "validation_batches",
]

DATA_FILE = "data.json"
PAIRS_FILE = "pairs.tsv"
SPLITS_DIR = "splits"
_HEAD_BYTES = 1 << 20


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


def _file_fingerprint(name):
    with tf.io.gfile.GFile(name, "rb") as handle:
        head = handle.read(_HEAD_BYTES)
    return {
        "file": name,
        "bytes": tf.io.gfile.stat(name).length,
        "head_sha256": hashlib.sha256(head).hexdigest(),
    }


def describe_data_change(saved: dict, current: dict) -> str | None:
    """What differs between two data fingerprints, in words (None: the same data)."""
    for role in ("data", "valid_data", "test_data", "settings"):
        before, after = saved.get(role), current.get(role)
        if before == after:
            continue
        if role == "settings":
            return f"the data settings changed from {before} to {after}"
        if not before or not after or len(before) != len(after):
            names = [entry["file"] for entry in before or []]
            new_names = [entry["file"] for entry in after or []]
            return f"--{role.replace('_', '-')} changed from {names} to {new_names}"
        for old, new in zip(before, after, strict=True):
            if old != new:
                if old["file"] != new["file"]:
                    return f"--{role.replace('_', '-')} file {old['file']} became {new['file']}"
                return (
                    f"{new['file']} changed since the run started "
                    f"({old['bytes']} -> {new['bytes']} bytes)"
                )
    return None


def _read_bounded(patterns, limit, train_config):
    files = stream.resolve_data_files(patterns)
    pairs = stream.pair_stream(files, skip_malformed=train_config.skip_malformed)
    result = [
        (s.decode("utf-8"), t.decode("utf-8"))
        for s, t in pairs.take(limit).as_numpy_iterator()
    ]
    return files, result


def _base_stream(files, train_config, *, repeat=False, counters=None):
    pairs = stream.pair_stream(
        files,
        skip_malformed=train_config.skip_malformed,
        counters=counters,
        repeat=repeat and not train_config.max_pairs,
        seed=train_config.seed,
    )
    if train_config.max_pairs:
        pairs = pairs.take(train_config.max_pairs)
        if repeat:
            pairs = pairs.repeat()
    return pairs


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
    if not isinstance(data, (str, os.PathLike)) and (
        data and not isinstance(data[0], (str, os.PathLike))
    ):
        text.write_pairs(run_dir / PAIRS_FILE, data)  # raises on a bad pair
        data = str(run_dir / PAIRS_FILE)
    files = stream.resolve_data_files(data)
    settings = {
        "seed": train_config.seed,
        "split": list(train_config.split),
        "max_pairs": train_config.max_pairs,
        "max_validation_pairs": train_config.max_validation_pairs,
        "max_test_pairs": train_config.max_test_pairs,
        "skip_malformed": train_config.skip_malformed,
    }
    fingerprint = {
        "data": [_file_fingerprint(f) for f in files],
        "settings": settings,
    }
    if valid_data is not None:
        valid_files = stream.resolve_data_files(valid_data)
        fingerprint["valid_data"] = [_file_fingerprint(f) for f in valid_files]
    if test_data is not None:
        test_files = stream.resolve_data_files(test_data)
        fingerprint["test_data"] = [_file_fingerprint(f) for f in test_files]

    record_path = run_dir / DATA_FILE
    split_dir = run_dir / SPLITS_DIR
    if record_path.exists():
        record = json.loads(record_path.read_text(encoding="utf-8"))
        change = describe_data_change(record["fingerprint"], fingerprint)
        if change:
            raise ValueError(
                f"{run_dir} holds an interrupted run on other data: {change}. Resume "
                "it with the same data, or choose another run directory (or --overwrite)"
            )
        split = (
            fingerprint_split.HeldOutSplit(**record["split"])
            if record["split"]
            else None
        )
        return RunData(
            files,
            split,
            text.read_pairs(split_dir / "validation.tsv"),
            _read_optional(split_dir / "test.tsv"),
            record["train_pairs"],
            fingerprint,
        )

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
    split = None
    train_pairs = None
    if validation is None or test is None:
        fractions[0] = 1.0 - fractions[1] - fractions[2]
        scan = fingerprint_split.scan_held_out(
            _base_stream(files, train_config),
            fractions,
            seed=train_config.seed,
            max_validation_pairs=train_config.max_validation_pairs,
            max_test_pairs=train_config.max_test_pairs,
        )
        split, train_pairs = scan.split, scan.train_pairs
        validation = scan.validation if validation is None else validation
        test = scan.test if test is None else test
    elif not train_config.train_steps:  # epochs need the count of training pairs
        train_pairs = int(
            _base_stream(files, train_config).reduce(
                tf.constant(0, tf.int64), lambda n, _: n + 1
            )
        )
    if not validation:
        raise ValueError(
            f"No validation pairs: {train_pairs} training pairs with split="
            f"{tuple(train_config.split)} and max_validation_pairs="
            f"{train_config.max_validation_pairs}; give more pairs, a larger split or "
            "--valid-data"
        )
    if not train_pairs and train_pairs is not None:
        raise ValueError(
            f"No training pairs left once {len(validation)} validation and "
            f"{len(test)} test pairs were held out; give more pairs"
        )
    text.write_pairs(split_dir / "validation.tsv", validation)
    text.write_pairs(split_dir / "test.tsv", test)
    record = {
        "fingerprint": fingerprint,
        "split": dataclasses.asdict(split) if split else None,
        "train_pairs": train_pairs,
        "validation_pairs": len(validation),
        "test_pairs": len(test),
    }
    tmp = record_path.with_name("tmp-" + record_path.name)
    tmp.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, record_path)
    return RunData(files, split, validation, test, train_pairs, fingerprint)


def _read_optional(path):
    return text.read_pairs(path) if path.exists() and path.stat().st_size else []


def training_pairs(run_data, train_config, *, repeat=False, counters=None):
    """The training ``(source, target)`` strings of a run, in file order."""
    pairs = _base_stream(run_data.files, train_config, repeat=repeat, counters=counters)
    return run_data.split.train_filter(pairs) if run_data.split else pairs


def _options(auto_shard):
    options = tf.data.Options()
    options.deterministic = True
    # The counters and the tokenizer's tables are state outside the iterator: the
    # counters are checkpointed beside it, the tables never change.
    options.experimental_external_state_policy = (
        tf.data.experimental.ExternalStatePolicy.IGNORE
    )
    options.experimental_distribute.auto_shard_policy = auto_shard
    return options


def _limits(model_config):
    return {
        "max_source_length": model_config.max_source_len,
        "max_target_length": model_config.max_target_len + 1,
    }


def training_stream(
    run_data,
    tokenizer,
    model_config,
    train_config,
    *,
    counters,
    replicas=1,
    workers=1,
    num_buckets=None,
):
    """The endless, shuffled, length-bucketed training batches of a run.

    Files are read again and again (their order reshuffled each pass), pairs are
    tokenized and length-checked inside ``tf.data`` (`encode_within_limits`,
    counted in ``counters``, with the real target tokens of each batch made),
    shuffled in a buffer of ``shuffle_buffer`` pairs
    and batched by length (`batch_by_length`, static shapes per bucket, the last
    partial batch of each bucket dropped). A function of the seed only. Under
    several workers, FILE auto-sharding when there are at least as many files as
    workers (each worker reads only its files), DATA sharding otherwise.
    """
    return shuffled_batches(
        training_pairs(run_data, train_config, repeat=True, counters=counters),
        tokenizer,
        model_config,
        train_config,
        counters=counters,
        replicas=replicas,
        num_buckets=num_buckets,
        auto_shard=auto_shard_policy(len(run_data.files), workers),
    )


def auto_shard_policy(num_files, workers):
    """FILE when every worker can have files of its own, DATA otherwise."""
    policy = tf.data.experimental.AutoShardPolicy
    return policy.FILE if num_files >= workers > 1 else policy.DATA


def shuffled_batches(
    pairs,
    tokenizer,
    model_config,
    train_config,
    *,
    counters=None,
    replicas=1,
    num_buckets=None,
    auto_shard=tf.data.experimental.AutoShardPolicy.DATA,
):
    """Endless ``(source, target)`` strings -> shuffled, length-bucketed training batches."""
    ids = encode_within_limits(
        pairs, tokenizer, counters=counters, **_limits(model_config)
    )
    batches = batch_by_length(
        ids.shuffle(train_config.shuffle_buffer, seed=train_config.seed),
        num_buckets=num_buckets or train_config.length_buckets,
        batch_size=train_config.batch_size,
        batch_tokens=train_config.batch_tokens,
        batch_multiple=replicas,
        drop_remainder=True,
        **_limits(model_config),
    )
    if counters is None:
        return batches

    def count_tokens(inputs, target_out):
        real = tf.math.count_nonzero(target_out, dtype=tf.int64)
        with tf.control_dependencies([counters.target_tokens.assign_add(real)]):
            return inputs, tf.identity(target_out)

    return (
        batches.map(count_tokens)
        .with_options(_options(auto_shard))
        .prefetch(tf.data.AUTOTUNE)
    )


def first_pass_fits(run_data, tokenizer, model_config, train_config, counters):
    """Whether any training pair fits the model's limits (reads until the first one that does)."""
    ids = encode_within_limits(
        training_pairs(run_data, train_config),
        tokenizer,
        counters=counters,
        **_limits(model_config),
    )
    return any(True for _ in ids.take(1))


def validation_batches(
    pairs, tokenizer, model_config, train_config, *, replicas=1, num_buckets=None
):
    """The validation batches (bucketed, every pair kept, cached), with a known length.

    Keras reads exactly ``cardinality`` batches, so it never runs past the end
    (no "Your input ran out of data" warning).
    """
    sources = tf.constant([s for s, _ in pairs], tf.string, shape=[len(pairs)])
    targets = tf.constant([t for _, t in pairs], tf.string, shape=[len(pairs)])
    ids = encode_within_limits(
        tf.data.Dataset.from_tensor_slices((sources, targets)),
        tokenizer,
        **_limits(model_config),
    )
    batches = batch_by_length(
        ids,
        num_buckets=num_buckets or train_config.length_buckets,
        batch_size=train_config.batch_size,
        batch_tokens=train_config.batch_tokens,
        batch_multiple=replicas,
        drop_remainder=False,
        **_limits(model_config),
    ).cache()
    count = int(batches.reduce(tf.constant(0, tf.int64), lambda n, _: n + 1))
    if not count:
        raise ValueError(
            f"None of the {len(pairs)} validation pairs fits the model's limits "
            f"(max_source_len={model_config.max_source_len}, "
            f"max_target_len={model_config.max_target_len})"
        )
    policy = tf.data.experimental.AutoShardPolicy.DATA
    return (
        batches.apply(tf.data.experimental.assert_cardinality(count))
        .with_options(_options(policy))
        .prefetch(tf.data.AUTOTUNE)
    )
