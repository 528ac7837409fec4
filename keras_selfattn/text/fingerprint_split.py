"""Train / validation / test by a fingerprint of the source text: decided pair by pair, in a stream.

Every pair gets the keyed SipHash fingerprint of its (stripped) source text
(`source_fingerprints`, ``tf.strings.to_hash_bucket_strong`` keyed by the seed):
the same on every platform, independent of the input order, equal for equal
sources, so all translations of one source land in the same split. The pairs
with the smallest fingerprints are held out: validation is every pair whose
fingerprint is at most `HeldOutSplit.validation_max`, test those above it and at
most `HeldOutSplit.test_max`, training the rest. The two thresholds are chosen
(`held_out_thresholds`) so that validation gets ``min(fraction * pairs, cap)``
pairs and test likewise (a whole group of equal sources more at most): a few
thousand pairs by default, whatever the size of the corpus.

`scan_held_out` finds the thresholds in one pass over a stream, keeping only the
candidates (at most the two caps, plus ties) in memory, and returns the held-out
pairs themselves; the training stream is then `HeldOutSplit.train_filter`.
`corpus.split_pairs` applies the same rule to a list.
"""

import dataclasses
import math
from collections.abc import Sequence

import numpy as np
import tensorflow as tf

__all__ = [
    "HeldOutSplit",
    "held_out_thresholds",
    "scan_held_out",
    "source_fingerprints",
]

_BUCKETS = 2**62
_KEY_TAG = 0x6B73612D73706C74  # "ksa-splt": the second half of the SipHash key
_SCAN_BATCH = 8192


def source_fingerprints(sources, seed: int = 0) -> tf.Tensor:
    """int64 fingerprints in ``[0, 2**62)`` of source strings, keyed by ``seed``.

    Example:

    >>> a = source_fingerprints(tf.constant(["le chat", "le chien", "le chat"]))
    >>> bool(a[0] == a[2]), bool(a[0] == a[1])
    (True, False)
    """
    key = [int(seed) % 2**64, _KEY_TAG]
    return tf.strings.to_hash_bucket_strong(sources, _BUCKETS, key)


def _check_fractions(fractions):
    fractions = tuple(float(f) for f in fractions)
    if (
        len(fractions) != 3
        or any(f < 0 or math.isnan(f) for f in fractions)
        or abs(sum(fractions) - 1.0) > 1e-6
    ):
        raise ValueError(
            "fractions must be three non-negative numbers (train, validation, test) "
            f"summing to 1. Received: fractions={fractions}"
        )
    return fractions


def _check_cap(name, value):
    if value is not None and (not isinstance(value, int) or value < 0):
        raise ValueError(
            f"{name} must be a non-negative integer or None. Received: {name}={value!r}"
        )


@dataclasses.dataclass(frozen=True)
class HeldOutSplit:
    """The thresholds of a fingerprint split (-1: that split is empty).

    Attributes:
        seed: the fingerprint key.
        validation_max: largest fingerprint of the validation split.
        test_max: largest fingerprint of the test split (>= ``validation_max``).
    """

    seed: int
    validation_max: int
    test_max: int

    def split_of(self, fingerprints):
        """0 (train), 1 (validation) or 2 (test) for each fingerprint (NumPy or TF)."""
        fingerprints = np.asarray(fingerprints, np.int64)
        return np.where(
            fingerprints <= self.validation_max,
            1,
            np.where(fingerprints <= self.test_max, 2, 0),
        )

    def train_filter(self, dataset: tf.data.Dataset) -> tf.data.Dataset:
        """Keeps the training pairs of a dataset of ``(source, target)`` scalars."""
        test_max = tf.constant(self.test_max, tf.int64)
        seed = self.seed

        def is_train(source, target):
            return source_fingerprints(source, seed) > test_max

        return dataset.filter(is_train)


def held_out_thresholds(
    smallest: np.ndarray,
    total: int,
    fractions: Sequence[float],
    *,
    seed: int,
    max_validation_pairs: int | None,
    max_test_pairs: int | None,
) -> HeldOutSplit:
    """Thresholds from the smallest fingerprints of a corpus of ``total`` pairs.

    Args:
        smallest: the pairs' smallest fingerprints, sorted ascending; at least the
            validation and test sizes many (all of them for a small corpus).
        total: the number of pairs.
        fractions: train, validation, test fractions.
        seed: the fingerprint key, recorded in the result.
        max_validation_pairs: cap on the validation size (None: no cap).
        max_test_pairs: cap on the test size (None: no cap).

    Returns:
        A `HeldOutSplit`.
    """
    _, validation_fraction, test_fraction = _check_fractions(fractions)
    sizes = []
    for fraction, cap in (
        (validation_fraction, max_validation_pairs),
        (test_fraction, max_test_pairs),
    ):
        size = round(fraction * total)
        sizes.append(size if cap is None else min(size, cap))
    n_validation, n_test = sizes
    smallest = np.asarray(smallest, np.int64)
    validation_max = int(smallest[n_validation - 1]) if n_validation else -1
    test_max = int(smallest[n_validation + n_test - 1]) if n_test else validation_max
    return HeldOutSplit(int(seed), validation_max, max(test_max, validation_max))


@dataclasses.dataclass
class HeldOutScan:
    """What `scan_held_out` found: the split, the held-out pairs and the counts."""

    split: HeldOutSplit
    validation: list
    test: list
    pairs: int
    train_pairs: int


def scan_held_out(
    dataset: tf.data.Dataset,
    fractions: Sequence[float] = (0.8, 0.1, 0.1),
    *,
    seed: int = 0,
    max_validation_pairs: int | None = 5000,
    max_test_pairs: int | None = 5000,
) -> HeldOutScan:
    """One pass over a ``(source, target)`` stream: the held-out split and its pairs.

    Memory holds the candidates only: the pairs with the smallest fingerprints,
    as many as the two caps allow (all pairs when a cap is None).

    Args:
        dataset: finite `tf.data.Dataset` of ``(source, target)`` scalar strings.
        fractions: train, validation, test fractions.
        seed: fingerprint key.
        max_validation_pairs: validation cap (None: no cap).
        max_test_pairs: test cap (None: no cap).

    Returns:
        `HeldOutScan` with the held-out pairs as ``(str, str)`` in stream order.
    """
    fractions = _check_fractions(fractions)
    _check_cap("max_validation_pairs", max_validation_pairs)
    _check_cap("max_test_pairs", max_test_pairs)
    keep = (
        None
        if max_validation_pairs is None or max_test_pairs is None
        else max_validation_pairs + max_test_pairs
    )
    batches = dataset.batch(_SCAN_BATCH).map(
        lambda s, t: (source_fingerprints(s, seed), s, t),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=True,
    )
    kept_fp = np.zeros([0], np.int64)
    kept_order = np.zeros([0], np.int64)
    kept_pairs = np.zeros([0, 2], object)
    total = 0
    limit = np.iinfo(np.int64).max
    for fingerprints, sources, targets in batches.as_numpy_iterator():
        chosen = fingerprints <= limit
        order = np.arange(total, total + len(fingerprints))[chosen]
        total += len(fingerprints)
        kept_fp = np.concatenate([kept_fp, fingerprints[chosen]])
        kept_order = np.concatenate([kept_order, order])
        kept_pairs = np.concatenate(
            [kept_pairs, np.stack([sources[chosen], targets[chosen]], axis=1)]
        )
        if keep is not None and len(kept_fp) > keep:
            limit = np.partition(kept_fp, keep - 1)[keep - 1]
            mask = kept_fp <= limit  # ties stay: a group of equal sources is whole
            kept_fp, kept_order, kept_pairs = (
                kept_fp[mask],
                kept_order[mask],
                kept_pairs[mask],
            )
    if not total:
        raise ValueError("No sentence pairs found in the data")
    split = held_out_thresholds(
        np.sort(kept_fp),
        total,
        fractions,
        seed=seed,
        max_validation_pairs=max_validation_pairs,
        max_test_pairs=max_test_pairs,
    )
    in_order = np.argsort(kept_order, kind="stable")
    which = split.split_of(kept_fp[in_order])
    pairs = [(s.decode("utf-8"), t.decode("utf-8")) for s, t in kept_pairs[in_order]]
    validation = [p for p, w in zip(pairs, which, strict=True) if w == 1]
    test = [p for p, w in zip(pairs, which, strict=True) if w == 2]
    return HeldOutScan(
        split, validation, test, total, total - len(validation) - len(test)
    )
