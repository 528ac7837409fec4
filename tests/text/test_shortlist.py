"""The shortlist table: counts and choices checked by hand and against a NumPy
reference, saved and loaded, and bad sizes refused."""

import itertools

import numpy as np
import pytest

from keras_selfattn.reserved_ids import END_ID
from keras_selfattn.text.shortlist import (
    SHORTLIST_FILE,
    CooccurrenceCounts,
    ShortlistTable,
)

# ids 0-3 are reserved; sources 4..7, targets 4..8
CORPUS = [
    ([4, 5], [4, 5, 3]),
    ([4, 6], [4, 6, 3]),
    ([4, 5, 5], [4, 5, 5, 3]),
    ([7], [8, 3]),
]


def _counts(corpus=CORPUS, sizes=(8, 9)):
    counts = CooccurrenceCounts(*sizes)
    for source, target in corpus:
        counts.add(source, target)
    return counts


def test_counts_by_hand():
    counts = _counts()
    # source 4 is in pairs 0, 1, 2; 5 in 0 and 2 (counted once in pair 2)
    assert counts.source.tolist() == [0, 0, 0, 0, 3, 2, 1, 1]
    # target tokens: 4 x3, 5 x3 (twice in pair 2), 6 x1, 8 x1, end x4
    assert counts.target.tolist() == [0, 0, 0, 4, 3, 3, 1, 0, 1]
    assert counts.pairs[4, 4] == 3 and counts.pairs[4, 5] == 2
    assert counts.pairs[5, 5] == 2 and counts.pairs[7, 8] == 1
    assert counts.pairs[7, 4] == 0 and counts.sentences == 4


def test_table_by_hand():
    table = _counts().table(per_source=1, frequent=1)
    # most frequent non-reserved target: 4 and 5 tie at 3, the lower id wins
    assert table.frequent.tolist() == [4]
    # best of source 4 beyond the frequent 4: target 5 (2) over 6 (1)
    assert table.candidates[4].tolist() == [5]
    assert table.candidates[6].tolist() == [6]
    assert table.candidates[7].tolist() == [8]
    # padding and pieces never seen give only the end id
    assert table.candidates[0].tolist() == [END_ID]
    assert table.ids_for([[7, 0]]).tolist() == [0, 1, 2, 3, 4, 8]


def _reference_table(corpus, sizes, per_source, frequent):
    """p(t|s) by dictionaries, ranked independently of the module's code."""
    pair_count, source_count, target_count = {}, {}, {}
    for source, target in corpus:
        for t in target:
            if t:
                target_count[t] = target_count.get(t, 0) + 1
        for s in set(source) - {0}:
            source_count[s] = source_count.get(s, 0) + 1
            for t in set(target) - {0}:
                pair_count[s, t] = pair_count.get((s, t), 0) + 1
    ranked = sorted(
        (t for t in target_count if t > 3), key=lambda t: (-target_count[t], t)
    )
    top = set(ranked[:frequent])
    candidates = np.full((sizes[0], per_source), END_ID)
    for s in range(1, sizes[0]):
        scored = [
            (pair_count.get((s, t), 0) / source_count[s], t)
            for t in range(4, sizes[1])
            if t not in top and pair_count.get((s, t), 0)
        ]
        best = [t for _, t in sorted(scored, key=lambda x: (-x[0], x[1]))]
        candidates[s, : len(best[:per_source])] = best[:per_source]
    return candidates, sorted(top)


@pytest.mark.parametrize("per_source,frequent", [(1, 1), (3, 2), (10, 20)])
def test_table_matches_reference(per_source, frequent):
    rng = np.random.default_rng(per_source + frequent)
    sizes = (30, 40)
    corpus = [
        (
            rng.integers(0, sizes[0], rng.integers(1, 8)).tolist(),
            rng.integers(3, sizes[1], rng.integers(1, 8)).tolist(),
        )
        for _ in range(200)
    ]
    table = _counts(corpus, sizes).table(per_source, frequent)
    candidates, top = _reference_table(corpus, sizes, per_source, frequent)
    assert table.frequent.tolist() == top
    np.testing.assert_array_equal(table.candidates, candidates)
    source = [s for s, _ in corpus[:4]]
    expected = set(candidates[list(itertools.chain(*source))].ravel())
    expected |= set(top) | {0, 1, 2, 3}
    assert table.ids_for(list(itertools.chain(*source))).tolist() == sorted(expected)


def test_save_and_load(tmp_path):
    table = _counts().table(per_source=2, frequent=1)
    path = table.save(tmp_path)
    assert path == tmp_path / SHORTLIST_FILE
    assert not list(tmp_path.glob("tmp-*"))  # written atomically
    loaded = ShortlistTable.load(tmp_path)
    np.testing.assert_array_equal(loaded.candidates, table.candidates)
    np.testing.assert_array_equal(loaded.frequent, table.frequent)
    assert loaded.record["pairs_counted"] == 4
    assert loaded.record["entries"] == 16 and loaded.record["bytes"] > 0
    assert loaded.record["association"].startswith("p(t|s)")


@pytest.mark.parametrize(
    "arguments,message",
    [
        ({"per_source": 0}, "per_source=0"),
        ({"frequent": -1}, "frequent=-1"),
        ({"frequent": 2.5}, "frequent=2.5"),
        ({"per_source": True}, "per_source=True"),
    ],
)
def test_bad_sizes(arguments, message):
    with pytest.raises(ValueError, match=message) as caught:
        _counts().table(**arguments)
    assert "\n" not in str(caught.value)


def test_bad_vocab_size_and_missing_file(tmp_path):
    with pytest.raises(ValueError, match="source_vocab_size=2"):
        CooccurrenceCounts(2, 10)
    with pytest.raises(FileNotFoundError, match="No shortlist table"):
        ShortlistTable.load(tmp_path)
    (tmp_path / SHORTLIST_FILE).write_bytes(b"not a table")
    with pytest.raises(ValueError, match="is not a shortlist table"):
        ShortlistTable.load(tmp_path)
