"""The batches of a run: the endless training stream, the validation batches, the length report.

Built on `run_data.training_pairs` and the held-out pairs: tokenized and
length-checked inside ``tf.data`` (`text.dataset.encode_within_limits`), shuffled
in a bounded buffer, batched by length (`text.dataset.batch_by_length`).
"""

import tensorflow as tf

from keras_selfattn.text.dataset import batch_by_length, encode_within_limits
from keras_selfattn.training.run_data import training_pairs

__all__ = [
    "auto_shard_policy",
    "first_pass_fits",
    "length_report",
    "make_training_datasets",
    "shuffled_batches",
    "training_stream",
    "validation_batches",
]


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
        # The stream is endless, so one iteration is the whole run: every new
        # iterator (Keras builds one more under a strategy) sees the same order.
        ids.shuffle(
            train_config.shuffle_buffer,
            seed=train_config.seed,
            reshuffle_each_iteration=False,
        ),
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


def make_training_datasets(splits, tokenizer, model_config, train_config):
    """Training and validation datasets from pairs in memory, and the steps per epoch.

    The batches of `train` (`run_data.shuffled_batches`: the training pairs
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
    train_ds = shuffled_batches(pairs, tokenizer, model_config, train_config).prefetch(
        tf.data.AUTOTUNE
    )
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
