"""Train / validation / test by source fingerprint, without reading the whole corpus.

Every pair gets the keyed SipHash fingerprint of its (stripped) source text
(`source_fingerprints`, ``tf.strings.to_hash_bucket_strong`` keyed by the seed):
the same on every platform, equal for equal sources, so all translations of one
source land in the same split.

The held-out pairs are drawn from the first `held_out_window` pairs of the
stream: ``max(cap / fraction)`` over validation and test, 50,000 with the
defaults (5000 pairs at 10% each); the whole stream when a split has no cap. In
that window the pairs with the smallest fingerprints are held out: validation
is every pair whose fingerprint is at most `HeldOutSplit.validation_max`, test
those above it and at most `HeldOutSplit.test_max`. Validation gets
``min(round(fraction * n), cap)`` pairs, ``n`` the pairs in the window (test
likewise; a whole group of equal sources more at most), which is exactly what
the fraction and the cap give on the whole corpus: a corpus longer than the
window has at least ``cap / fraction`` pairs, so the cap decides. A corpus that
fits in the window is split exactly as if it were read whole.

Training is every other pair of the stream, decided pair by pair
(`HeldOutSplit.is_training`): its source is not one of the held-out sources (a
set of at most the two caps, plus ties). So finding the held-out pairs costs one
window, the same for 300 thousand pairs and for 40 million, no source straddles
two splits anywhere in the corpus, and no training pair is wasted: beyond the
window only the pairs repeating a held-out source are left out. `scan_held_out`
reads the window of a stream; `corpus.split_pairs` applies it to a list.
"""

import dataclasses
import math
from collections.abc import Sequence

import numpy as np
import tensorflow as tf

__all__ = [
    "HeldOutScan",
    "HeldOutSplit",
    "held_out_thresholds",
    "held_out_window",
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
    if value is not None and (
        isinstance(value, bool) or not isinstance(value, int) or value < 0
    ):
        raise ValueError(
            f"{name} must be a non-negative integer or None. Received: {name}={value!r}"
        )


def held_out_window(
    fractions: Sequence[float],
    max_validation_pairs: int | None,
    max_test_pairs: int | None,
) -> int | None:
    """How many leading pairs the held-out pairs are drawn from (None: all of them).

    The smallest window in which the cap of every held-out split decides its
    size, as it does on any corpus longer than the window.

    Example:

    >>> held_out_window((0.8, 0.1, 0.1), 5000, 5000)
    50000
    >>> held_out_window((0.8, 0.1, 0.1), 5000, None) is None
    True
    >>> held_out_window((1.0, 0.0, 0.0), None, None)
    0
    """
    _, validation_fraction, test_fraction = _check_fractions(fractions)
    _check_cap("max_validation_pairs", max_validation_pairs)
    _check_cap("max_test_pairs", max_test_pairs)
    window = 0
    for fraction, cap in (
        (validation_fraction, max_validation_pairs),
        (test_fraction, max_test_pairs),
    ):
        if fraction == 0 or cap == 0:
            continue
        if cap is None:
            return None
        # The smallest n with round(fraction * n) >= cap.
        n = math.ceil(cap / fraction)
        while round(fraction * n) < cap:
            n += 1
        window = max(window, n)
    return window


@dataclasses.dataclass(frozen=True)
class HeldOutSplit:
    """Which pairs of a corpus are held out, and so which are training pairs.

    Attributes:
        seed: the fingerprint key.
        validation_max: largest fingerprint of the validation split (-1: empty).
        test_max: largest fingerprint of the test split (>= ``validation_max``).
        window: the leading pairs the held-out pairs were drawn from (None: the
            whole corpus, so every pair with a fingerprint above ``test_max`` is
            a training pair).
        held_out: with a window, the fingerprints of the held-out sources,
            sorted: every pair with another source is a training pair.
    """

    seed: int
    validation_max: int
    test_max: int
    window: int | None = None
    held_out: tuple[int, ...] = dataclasses.field(default=(), repr=False)

    def split_of(self, fingerprints):
        """0 (train), 1 (validation) or 2 (test) per fingerprint of the window."""
        fingerprints = np.asarray(fingerprints, np.int64)
        return np.where(
            fingerprints <= self.validation_max,
            1,
            np.where(fingerprints <= self.test_max, 2, 0),
        )

    def record(self) -> dict:
        """What a run directory keeps (the held-out sources are in its split files)."""
        return {
            "seed": self.seed,
            "validation_max": self.validation_max,
            "test_max": self.test_max,
            "window": self.window,
        }

    @classmethod
    def from_record(cls, record: dict, held_out_sources: Sequence[str]):
        """The split of `record`, its held-out set rebuilt from the held-out sources."""
        split = cls(
            int(record["seed"]),
            int(record["validation_max"]),
            int(record["test_max"]),
            record.get("window"),  # absent: written when the whole corpus was scanned
        )
        if split.window is None:
            return split
        return split.holding_out(held_out_sources)

    def holding_out(self, sources: Sequence[str]):
        """This split with ``sources`` as its held-out set."""
        fingerprints = source_fingerprints(
            tf.constant(list(sources), tf.string), self.seed
        ).numpy()
        held_out = tuple(int(f) for f in np.unique(fingerprints))
        return dataclasses.replace(self, held_out=held_out)

    def is_training(self, sources) -> tf.Tensor:
        """A bool tensor shaped like ``sources``: which of them are training sources."""
        fingerprints = source_fingerprints(sources, self.seed)
        if self.window is None:
            return fingerprints > self.test_max
        if not self.held_out:
            return tf.ones_like(fingerprints, tf.bool)
        held_out = tf.constant(self.held_out, tf.int64)
        flat = tf.reshape(fingerprints, [-1])
        at = tf.minimum(tf.searchsorted(held_out, flat), len(self.held_out) - 1)
        return tf.reshape(tf.gather(held_out, at) != flat, tf.shape(fingerprints))

    def train_filter(self, dataset: tf.data.Dataset) -> tf.data.Dataset:
        """Keeps the training pairs of a dataset of ``(source, target)`` scalars."""
        # Graph code: nothing for AutoGraph to convert (its conversion costs time).
        return dataset.filter(
            tf.autograph.experimental.do_not_convert(
                lambda source, target: self.is_training(source)
            )
        )


def held_out_thresholds(
    smallest: np.ndarray,
    total: int,
    fractions: Sequence[float],
    *,
    seed: int,
    max_validation_pairs: int | None,
    max_test_pairs: int | None,
    window: int | None = None,
) -> HeldOutSplit:
    """Thresholds from the smallest fingerprints of ``total`` pairs.

    Args:
        smallest: the pairs' smallest fingerprints, sorted ascending; at least the
            validation and test sizes many (all of them for a small corpus).
        total: the number of pairs they were drawn from.
        fractions: train, validation, test fractions.
        seed: the fingerprint key, recorded in the result.
        max_validation_pairs: cap on the validation size (None: no cap).
        max_test_pairs: cap on the test size (None: no cap).
        window: recorded in the result (None: ``total`` is the whole corpus).

    Returns:
        A `HeldOutSplit` (without its held-out set: `HeldOutSplit.holding_out`).
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
    return HeldOutSplit(
        int(seed), validation_max, max(test_max, validation_max), window
    )


@dataclasses.dataclass
class HeldOutScan:
    """What `scan_held_out` found.

    Attributes:
        split: the `HeldOutSplit`.
        validation: the validation pairs, ``(str, str)`` in stream order.
        test: the test pairs, likewise.
        pairs: the pairs read (the window, or the whole stream if shorter).
        train_pairs: the training pairs of the stream (None: the stream is
            longer than the window and was not counted).
    """

    split: HeldOutSplit
    validation: list
    test: list
    pairs: int
    train_pairs: int | None


def _fingerprinted_batches(pairs, seed):
    """``pairs`` in batches of `_SCAN_BATCH`: ``(fingerprints, sources, targets)``."""
    fingerprinted = tf.autograph.experimental.do_not_convert(  # see `train_filter`
        lambda sources, targets: (source_fingerprints(sources, seed), sources, targets)
    )
    return pairs.batch(_SCAN_BATCH).map(
        fingerprinted, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True
    )


def scan_held_out(
    dataset: tf.data.Dataset,
    fractions: Sequence[float] = (0.8, 0.1, 0.1),
    *,
    seed: int = 0,
    max_validation_pairs: int | None = 5000,
    max_test_pairs: int | None = 5000,
) -> HeldOutScan:
    """Reads the held-out window of a ``(source, target)`` stream: split and pairs.

    Reads `held_out_window` pairs (and one more, to learn whether the stream
    goes on). Memory holds the candidates only: the pairs with the smallest
    fingerprints, as many as the two caps allow (all pairs when a cap is None).

    Args:
        dataset: finite `tf.data.Dataset` of ``(source, target)`` scalar strings.
        fractions: train, validation, test fractions.
        seed: fingerprint key.
        max_validation_pairs: validation cap (None: no cap).
        max_test_pairs: test cap (None: no cap).

    Returns:
        `HeldOutScan`.

    Raises:
        ValueError: the stream is empty.
    """
    fractions = _check_fractions(fractions)
    window = held_out_window(fractions, max_validation_pairs, max_test_pairs)
    keep = (
        None
        if max_validation_pairs is None or max_test_pairs is None
        else max_validation_pairs + max_test_pairs
    )
    read = dataset if window is None else dataset.take(window + 1)
    batches = _fingerprinted_batches(read, seed)
    kept_fp, kept_order, kept_pairs, total, more = _smallest_fingerprints(
        batches, window, keep
    )
    if not total and not more:
        raise ValueError("No sentence pairs found in the data")
    split = held_out_thresholds(
        np.sort(kept_fp),
        total,
        fractions,
        seed=seed,
        max_validation_pairs=max_validation_pairs,
        max_test_pairs=max_test_pairs,
        window=window if more else None,
    )
    validation, test = _held_out_pairs(split, kept_fp, kept_order, kept_pairs)
    if more:
        split = split.holding_out([s for s, _ in validation + test])
    train_pairs = None if more else total - len(validation) - len(test)
    return HeldOutScan(split, validation, test, total, train_pairs)


def _held_out_pairs(split, fingerprints, order, pairs):
    """The validation and the test pairs among the candidates, in stream order."""
    in_order = np.argsort(order, kind="stable")
    which = split.split_of(fingerprints[in_order])
    pairs = [(s.decode("utf-8"), t.decode("utf-8")) for s, t in pairs[in_order]]
    validation = [p for p, w in zip(pairs, which, strict=True) if w == 1]
    test = [p for p, w in zip(pairs, which, strict=True) if w == 2]
    return validation, test


def _smallest_fingerprints(batches, window, keep):
    """The pairs of the window with the ``keep`` smallest fingerprints (ties kept).

    Args:
        batches: iterable of ``(fingerprints, sources, targets)`` batches.
        window: pairs to read (None: all); one more is read to learn whether the
            stream goes on.
        keep: how many candidates to keep (None: all).

    Returns:
        ``(fingerprints, positions in the stream, [source, target] rows, pairs
        read, whether the stream goes on past the window)``.
    """
    kept_fp = np.zeros([0], np.int64)
    kept_order = np.zeros([0], np.int64)
    kept_pairs = np.zeros([0, 2], object)
    total = 0
    more = False
    limit = np.iinfo(np.int64).max
    for fingerprints, sources, targets in batches.as_numpy_iterator():
        if window is not None and total + len(fingerprints) > window:
            more = True  # the pair after the window exists: a longer stream
            cut = window - total
            fingerprints, sources, targets = (
                fingerprints[:cut],
                sources[:cut],
                targets[:cut],
            )
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
    return kept_fp, kept_order, kept_pairs, total, more
