"""The served searches in length groups (`in_length_groups`): each request's rows
sorted by source length and searched as several independent loops give the tokens
of one search over the request, in the request's order."""

import numpy as np
import pytest
import tensorflow as tf

from keras_selfattn import serving
from keras_selfattn.decoding import beam_search_decode, greedy_decode
from keras_selfattn.serving.signatures import in_length_groups, serving_functions
from tests.test_decoding import sharpened_model

# Rows of many lengths, unsorted, with ties (the sort is stable) and one row
# as long as the batch.
SOURCE = np.array(
    [
        [5, 6, 7, 0, 0, 0, 0],
        [9, 4, 5, 6, 7, 8, 11],
        [4, 0, 0, 0, 0, 0, 0],
        [8, 9, 10, 11, 0, 0, 0],
        [6, 5, 0, 0, 0, 0, 0],
        [7, 0, 0, 0, 0, 0, 0],
        [10, 4, 9, 0, 0, 0, 0],
    ],
    "int32",
)


@pytest.fixture(scope="module")
def model():
    return sharpened_model()


class _Searches:
    """``search`` in ``groups`` length groups, as a `tf.function` of any (B, T)
    source: traced once per number of groups (a trace of a search is most of the
    time of these tests), called on as many sources as a test likes."""

    def __init__(self, model, search):
        self.model, self.search, self.functions = model, search, {}

    def __call__(self, groups, source):
        if groups not in self.functions:
            self.functions[groups] = tf.function(
                lambda ids: in_length_groups(
                    lambda x: self.search(self.model, x), ids, groups
                ),
                input_signature=[tf.TensorSpec([None, None], tf.int32)],
            )
        outputs = self.functions[groups](tf.constant(source))
        return {k: v.numpy() for k, v in outputs.items()}


SEARCHES = {
    "greedy": lambda model, ids: greedy_decode(model, ids, 6),
    "beam": lambda model, ids: beam_search_decode(model, ids, 3, 6),
}


@pytest.fixture(scope="module")
def searches(model):
    """A `_Searches` of each of `SEARCHES`, by name, shared by the tests of this
    file: each number of groups is traced once for all of them."""
    return {name: _Searches(model, search) for name, search in SEARCHES.items()}


# Slow: a search traced for each group layout (9-14 CPU-s).
@pytest.mark.slow
@pytest.mark.parametrize("search", sorted(SEARCHES))
def test_groups_give_the_tokens_of_one_search_in_the_input_order(searches, search):
    searched = searches[search]
    whole = searched(1, SOURCE)
    # Each row alone is the reference of its own tokens: the order is the input's.
    for row in range(len(SOURCE)):
        alone = searched(1, SOURCE[row : row + 1])
        steps = alone["ids"].shape[-1]
        np.testing.assert_array_equal(whole["ids"][row, ..., :steps], alone["ids"][0])
        assert not whole["ids"][row, ..., steps:].any()
    # 2 (runs of 3 and 4 rows) and 3 (2, 2 and 3) over the 7 rows: runs of
    # several rows, of unequal sizes, one case a search; 4 over the first 3 rows
    # (lengths 3, 7, 1: sorted, not in the input order), more groups than rows:
    # an empty run and runs of one row (one row a run, what as many groups as
    # rows would check, is in it). Each run traces a search (most of this
    # test's time), hence 4 groups of 3 rows rather than 8 of 7, and greedy 2
    # groups, the beam (whose outputs have a beam axis more) 3.
    cases = ((2, 7), (4, 3)) if search == "greedy" else ((3, 7), (4, 3))
    for groups, rows in cases:
        source = SOURCE[:rows]
        reference = whole if rows == len(SOURCE) else searched(1, source)
        grouped = searched(groups, source)
        assert groups > rows or rows == len(SOURCE)
        assert set(grouped) == set(reference)
        for key in reference:
            assert grouped[key].shape == reference[key].shape, (key, groups)
        np.testing.assert_array_equal(grouped["ids"], reference["ids"])
        np.testing.assert_array_equal(grouped["lengths"], reference["lengths"])
        np.testing.assert_allclose(grouped["scores"], reference["scores"], atol=1e-5)


# Slow: XLA compiles or traces several searches (over 4 CPU-s).
@pytest.mark.slow
def test_groups_of_an_empty_batch_and_of_one_row(searches):
    searched = searches["greedy"]
    empty = searched(2, np.zeros([0, 3], "int32"))
    assert empty["ids"].shape[0] == 0 and empty["scores"].shape == (0,)
    one = searched(2, SOURCE[1:2])
    np.testing.assert_array_equal(one["ids"], searched(1, SOURCE[1:2])["ids"])


def test_groups_must_be_a_positive_integer(text_run_dir):
    from keras_selfattn.inference import load_translator

    translator = load_translator(text_run_dir)
    for bad in (0, -2, 1.5, True, "2"):
        with pytest.raises(ValueError, match=f"groups={bad!r}"):
            serving_functions(translator, groups=bad)


@pytest.mark.slow
def test_an_export_in_one_group_translates_as_the_default(
    one_group_export, text_export_served, sample_texts
):
    """The default export (`DEFAULT_GROUPS` length groups a request, served by a
    fresh process) and ``groups=1`` (its graph with one group, served in this
    process), under both loaders: the same texts."""
    from tests.serving.test_export import (
        Served,
        assert_same_texts,
        serve_in_this_process,
    )

    assert serving.DEFAULT_GROUPS > 1
    served = serve_in_this_process(Served(one_group_export), sample_texts)
    assert_same_texts(text_export_served, served)


@pytest.mark.slow  # traces the searches of three groups: 7-10 CPU-s
def test_an_empty_group_is_not_searched(model):
    """A request of fewer rows than groups searches only the groups with rows (a
    search costs its encoder, its loop's set-up and the held output kernel)."""
    calls = []

    def counted(model, ids):
        def count(rows):
            calls.append(int(rows))
            return rows

        rows = tf.py_function(count, [tf.shape(ids)[0]], tf.int32)
        with tf.control_dependencies([rows]):
            return greedy_decode(model, tf.identity(ids), 6)

    searched = _Searches(model, counted)
    one = searched(4, SOURCE[1:2])
    assert calls == [1]  # one search, of the one row; three groups left empty
    np.testing.assert_array_equal(one["ids"], searched(1, SOURCE[1:2])["ids"])
    calls.clear()
    searched(4, SOURCE[:2])
    assert sorted(calls) == [1, 1]
    calls.clear()
    searched(4, SOURCE)
    assert sorted(calls) == [1, 2, 2, 2]
