"""The batches of a run: the endless training stream, validation batches, length report.

Built on `run_data.training_pairs` and the held-out pairs: tokenized and
length-checked inside ``tf.data`` (`text.dataset.encode_within_limits`), shuffled
in a bounded buffer, batched by length (`text.dataset.batch_by_length`).
"""

import dataclasses

import tensorflow as tf

from keras_selfattn.text.dataset import batch_by_length, encode_within_limits
from keras_selfattn.training.data.run_data import (
    Passes,
    training_pairs,
    training_passes,
)
from keras_selfattn.training.resume.restart import restored_input

__all__ = [
    "files_of_worker",
    "first_pass_fits",
    "length_report",
    "make_training_datasets",
    "shuffled_batches",
    "training_input",
    "training_stream",
    "validation_batches",
]


def _options():
    options = tf.data.Options()
    options.deterministic = True
    # The counters and the tokenizer's tables are state outside the iterator: the
    # counters are checkpointed beside it, the tables never change.
    options.experimental_external_state_policy = (
        tf.data.experimental.ExternalStatePolicy.IGNORE
    )
    # Under several workers tf.distribute shards the batches by element;
    # `own_files_input` turns that off for a worker that reads its own files.
    options.experimental_distribute.auto_shard_policy = (
        tf.data.experimental.AutoShardPolicy.DATA
    )
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
    num_buckets=None,
):
    """The endless, shuffled, length-bucketed training batches of a run.

    Files are read again and again (their order reshuffled each pass), pairs are
    tokenized and length-checked inside ``tf.data`` (`encode_within_limits`,
    the first pass counted in ``counters``, so that its counts are of distinct
    pairs, with the real target tokens of each batch made),
    shuffled in a buffer of ``shuffle_buffer`` pairs
    and batched by length (`batch_by_length`, static shapes per bucket, the last
    partial batch of each bucket dropped). A function of the seed only. Under
    several workers every worker reads the whole stream and tf.distribute
    shards the batches by element (DATA); `own_files_input` is the FILE way.
    """
    return shuffled_batches(
        training_passes(run_data, train_config, counters),
        tokenizer,
        model_config,
        train_config,
        counters=counters,
        replicas=replicas,
        num_buckets=num_buckets,
    )


def training_input(
    strategy,
    role,
    run_data,
    tokenizer,
    model_config,
    train_config,
    *,
    counters,
    num_buckets,
    resume,
    checkpointable,
):
    """What ``fit`` trains on, from where a resumed run left off; its `ResumableInput`.

    With a file for every worker, each worker reads its own (`own_files_input`);
    otherwise the whole stream (`training_stream`), continued by
    `restart.restored_input`. ``resume`` is ``(backup_dir, initial_epoch, plan)``.
    Returns ``(input, resumable)`` (``resumable`` None: the input is replayed).
    """
    backup_dir, initial_epoch, plan = resume
    own_files = files_of_worker(run_data.files, role.count, role.index, train_config)
    if own_files is None:  # one worker, or DATA sharding
        stream = training_stream(
            run_data,
            tokenizer,
            model_config,
            train_config,
            counters=counters,
            replicas=strategy.num_replicas_in_sync,
            num_buckets=num_buckets,
        )
        return restored_input(
            stream,
            counters,
            backup_dir,
            initial_epoch,
            plan,
            checkpointable=checkpointable,
        )
    own = own_files_input(
        strategy,
        dataclasses.replace(run_data, files=own_files),
        tokenizer,
        model_config,
        train_config,
        counters=counters,
        local_replicas=strategy.num_replicas_in_sync // role.count,
        skip_steps=plan.step_after(initial_epoch),
        num_buckets=num_buckets,
    )
    return own, None  # a distributed iterator is not checkpointable


def own_files_input(
    strategy,
    run_data,
    tokenizer,
    model_config,
    train_config,
    *,
    counters,
    local_replicas,
    skip_steps=0,
    num_buckets=None,
):
    """FILE sharding: each worker makes per-replica batches from its own files only.

    ``run_data.files`` are this worker's files (`files_of_worker`). Through
    ``strategy.distribute_datasets_from_function`` nothing is rebatched or
    sharded after this pipeline, so a step takes one batch for each of the
    worker's ``local_replicas`` from its own stream, and a resumed run skips
    exactly ``skip_steps * local_replicas`` of them. (tf.data's own FILE
    rewrite cannot serve here: it walks from the batches back to the file
    source and cannot pass the length buckets, "Did not find a shardable
    source".)
    """
    replicas = strategy.num_replicas_in_sync
    if train_config.batch_size % replicas:
        raise ValueError(
            f"batch_size must be a multiple of the {replicas} replicas. Received: "
            f"batch_size={train_config.batch_size}"
        )
    per_replica = dataclasses.replace(
        train_config,
        batch_size=train_config.batch_size // replicas,
        batch_tokens=(
            train_config.batch_tokens // replicas if train_config.batch_tokens else None
        ),
    )

    def dataset_fn(context):
        stream = training_stream(
            run_data,
            tokenizer,
            model_config,
            per_replica,
            counters=counters,
            num_buckets=num_buckets,
        )
        options = tf.data.Options()
        options.experimental_distribute.auto_shard_policy = (
            tf.data.experimental.AutoShardPolicy.OFF
        )
        return stream.skip(skip_steps * local_replicas).with_options(options)

    return strategy.distribute_datasets_from_function(dataset_fn)


def files_of_worker(files, workers, worker, train_config):
    """Worker ``worker``'s files under FILE sharding, else None.

    They are files ``worker``, ``worker + workers``, and so on.

    FILE sharding needs a file for every worker; with ``max_pairs`` the run
    trains on the first pairs of the whole stream, so it needs DATA sharding.

    Example:

    >>> from keras_selfattn.training import TrainConfig
    >>> files_of_worker(["a", "b", "c"], 2, 1, TrainConfig())
    ['b']
    >>> files_of_worker(["a"], 2, 1, TrainConfig()) is None
    True
    """
    if workers > 1 and len(files) >= workers and not train_config.max_pairs:
        return list(files[worker::workers])
    return None


def shuffled_batches(
    pairs,
    tokenizer,
    model_config,
    train_config,
    *,
    counters=None,
    replicas=1,
    num_buckets=None,
):
    """Endless ``(source, target)`` strings -> shuffled, length-bucketed batches.

    ``pairs``: a dataset, or `run_data.Passes` (the length check counts in
    ``counters`` on the first pass only: pairs read and dropped once each).
    """
    if isinstance(pairs, Passes):
        ids = encode_within_limits(
            pairs.first, tokenizer, counters=counters, **_limits(model_config)
        ).concatenate(
            encode_within_limits(pairs.later, tokenizer, **_limits(model_config))
        )
    else:
        ids = encode_within_limits(
            pairs, tokenizer, counters=counters, **_limits(model_config)
        )
    batches = batch_by_length(
        # The stream is endless, so one iteration is the whole run: every new
        # iterator (Keras builds one more under a strategy) sees the same order.
        ids.shuffle(
            train_config.shuffle_buffer,
            seed=train_config.seed,
            reshuffle_each_iteration=False,
        ),
        num_buckets=num_buckets or train_config.length_buckets,
        bucket_spacing=train_config.bucket_spacing,
        batch_size=train_config.batch_size,
        batch_tokens=train_config.batch_tokens,
        batch_multiple=replicas,
        drop_remainder=True,
        **_limits(model_config),
    )
    if counters is not None:

        @tf.autograph.experimental.do_not_convert  # graph code: nothing to convert
        def count_tokens(inputs, target_out):
            real = tf.math.count_nonzero(target_out, dtype=tf.int64)
            with tf.control_dependencies([counters.target_tokens.assign_add(real)]):
                return inputs, tf.identity(target_out)

        batches = batches.map(count_tokens)
    return batches.with_options(_options()).prefetch(tf.data.AUTOTUNE)


def first_pass_fits(run_data, tokenizer, model_config, train_config, counters):
    """Whether any training pair fits the model's limits (reads up to the first)."""
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
        bucket_spacing=train_config.bucket_spacing,
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
    return (
        batches.apply(tf.data.experimental.assert_cardinality(count))
        .with_options(_options())
        .prefetch(tf.data.AUTOTUNE)
    )


def make_training_datasets(splits, tokenizer, model_config, train_config):
    """Training and validation datasets from pairs in memory, and the steps per epoch.

    The batches of `train` (`shuffled_batches`: the training pairs
    repeated, tokenized and length-checked in ``tf.data``, shuffled in a bounded
    buffer, batched by length with the last partial batch of each bucket
    dropped), for small data given as lists (``splits.train``,
    ``splits.validation``). With ``length_buckets=1`` every shape is static.

    Returns:
        ``(train_ds, valid_ds, steps_per_epoch)``.
    """
    train = list(splits.train)
    pairs = tf.data.Dataset.from_tensor_slices(
        (
            tf.constant([s for s, _ in train], tf.string, shape=[len(train)]),
            tf.constant([t for _, t in train], tf.string, shape=[len(train)]),
        )
    ).repeat()
    train_ds = shuffled_batches(pairs, tokenizer, model_config, train_config)
    valid_ds = validation_batches(
        list(splits.validation), tokenizer, model_config, train_config
    )
    return train_ds, valid_ds, max(1, len(train) // train_config.batch_size)


def length_report(counts, model_config):
    """One line: how many of the pairs read were dropped for length, and why."""
    pairs, dropped = counts["pairs"], counts["too_long"]
    share = dropped / pairs if pairs else 0.0
    return (
        f"{dropped} of {pairs} pairs read ({share:.1%}) dropped for length: longer "
        f"than max_source_len={model_config.max_source_len} source tokens or "
        f"max_target_len={model_config.max_target_len} target tokens"
    )
