"""make_dataset: shapes, start/end shifting, padding, limits, buckets, determinism."""

import numpy as np
import pytest
import tensorflow as tf

from keras_selfattn.text.dataset import (
    encode_pairs,
    encode_within_limits,
    fits_limits,
    make_dataset,
    to_example,
)
from keras_selfattn.text.pair_tokenizer import PairTokenizer
from keras_selfattn.text.tokenizers import TokenizerConfig
from keras_selfattn.text.vocab import END_ID, PAD_ID, START_ID

PAIRS = [
    (" ".join([f"w{i % 7}"] * (1 + i % 9)), f"t{i % 5} " * (1 + i % 6))
    for i in range(60)
]


@pytest.fixture(scope="module")
def tokenizer():
    return PairTokenizer.build(PAIRS, TokenizerConfig(kind="word"))


def _batches(dataset):
    return [
        (inputs["source"].numpy(), inputs["target_in"].numpy(), target_out.numpy())
        for inputs, target_out in dataset
    ]


def test_shapes_dtypes_and_start_end_shift(tokenizer):
    dataset = make_dataset(PAIRS, tokenizer, batch_size=8, shuffle=False)
    spec_inputs, spec_out = dataset.element_spec
    assert set(spec_inputs) == {"source", "target_in"}
    assert spec_inputs["source"].dtype == tf.int32 and spec_out.dtype == tf.int32
    assert spec_inputs["source"].shape.as_list() == [None, None]
    batches = _batches(dataset)
    assert sum(len(b[0]) for b in batches) == len(PAIRS)
    all_source_ids = tokenizer.source.encode(
        tf.constant([s for s, _ in PAIRS])
    ).to_list()
    all_target_ids = tokenizer.target.encode(
        tf.constant([t for _, t in PAIRS])
    ).to_list()
    position = 0
    for source, target_in, target_out in batches:
        assert target_in.shape == target_out.shape and len(source) == len(target_in)
        for row in range(len(source)):
            source_ids = all_source_ids[position]
            target_ids = all_target_ids[position]
            position += 1
            n = len(target_ids)
            assert source[row, : len(source_ids)].tolist() == source_ids
            assert not source[row, len(source_ids) :].any()  # padding is 0
            assert target_in[row, : n + 1].tolist() == [START_ID] + target_ids
            assert target_out[row, : n + 1].tolist() == target_ids + [END_ID]
            assert target_in[row, 1 : n + 1].tolist() == target_out[row, :n].tolist()
            assert (target_in[row, n + 1 :] == PAD_ID).all()
            assert (target_out[row, n + 1 :] == PAD_ID).all()


def test_reads_a_tsv_path(tmp_path, tokenizer):
    path = tmp_path / "pairs.tsv"
    path.write_text(
        "".join(f"{s}\t{t}\tCC-BY\n" for s, t in PAIRS[:10]), encoding="utf-8"
    )
    from_file = _batches(make_dataset(path, tokenizer, batch_size=4, shuffle=False))
    from_list = _batches(
        make_dataset(PAIRS[:10], tokenizer, batch_size=4, shuffle=False)
    )
    for a, b in zip(from_file, from_list, strict=True):
        for x, y in zip(a, b, strict=True):
            np.testing.assert_array_equal(x, y)
    (tmp_path / "bad.tsv").write_text("a\tb\nbroken\n")
    with pytest.raises(ValueError, match=r"bad\.tsv:2: no tab"):
        make_dataset(tmp_path / "bad.tsv", tokenizer)


def test_filter_and_truncate(tokenizer):
    kept = _batches(
        make_dataset(
            PAIRS,
            tokenizer,
            batch_size=100,
            shuffle=False,
            max_source_length=4,
            max_target_length=3,
        )
    )
    ((source, target_in, target_out),) = kept
    expected = sum(
        1 for s, t in PAIRS if len(s.split()) <= 4 and len(t.split()) + 1 <= 3
    )
    assert len(source) == expected and source.shape[1] <= 4 and target_in.shape[1] <= 3
    cut = _batches(
        make_dataset(
            PAIRS,
            tokenizer,
            batch_size=100,
            shuffle=False,
            max_source_length=4,
            max_target_length=3,
            too_long="truncate",
        )
    )
    ((source, target_in, target_out),) = cut
    assert len(source) == len(PAIRS)
    assert source.shape[1] == 4 and target_in.shape[1] == 3
    assert ((target_out == END_ID).sum(axis=1) == 1).all()


def test_static_shapes_for_xla(tokenizer):
    dataset = make_dataset(
        PAIRS,
        tokenizer,
        batch_size=16,
        max_source_length=10,
        max_target_length=8,
        pad_to_max_length=True,
        drop_remainder=True,
    )
    inputs, target_out = dataset.element_spec
    assert inputs["source"].shape.as_list() == [16, 10]
    assert inputs["target_in"].shape.as_list() == [16, 8]
    assert target_out.shape.as_list() == [16, 8]
    assert len(list(dataset)) == len(PAIRS) // 16


def test_buckets_group_similar_lengths(tokenizer):
    dataset = make_dataset(
        PAIRS, tokenizer, batch_size=4, bucket_boundaries=[4, 7], seed=1
    )
    batches = _batches(dataset)
    assert sum(len(b[0]) for b in batches) == len(PAIRS)
    for source, target_in, _ in batches:
        longest = max(source.shape[1], target_in.shape[1])
        lengths = np.maximum((source != 0).sum(1), (target_in != 0).sum(1))
        bucket = np.digitize(lengths, [4, 7])
        assert len(set(bucket.tolist())) == 1, (longest, lengths)


def test_shuffle_is_seeded_and_changes_each_epoch(tokenizer):
    def order(seed, epochs=2):
        dataset = make_dataset(PAIRS, tokenizer, batch_size=60, seed=seed)
        return [b[0].tolist() for epoch in range(epochs) for b in _batches(dataset)]

    first = order(0)
    assert first == order(0)
    assert first != order(1)
    assert first[0] != first[1]  # a new order each epoch
    plain = _batches(make_dataset(PAIRS, tokenizer, batch_size=60, shuffle=False))
    assert sorted(map(tuple, first[0])) == sorted(map(tuple, plain[0][0].tolist()))


@pytest.mark.parametrize(
    "options",
    [
        {"bucket_boundaries": [4, 7]},
        {"max_source_length": 5, "max_target_length": 4},
        {"max_source_length": 5, "too_long": "truncate", "drop_remainder": True},
        {"max_source_length": 9, "max_target_length": 7, "pad_to_max_length": True},
    ],
)
def test_the_number_of_batches_is_known_and_true_every_epoch(tokenizer, options):
    dataset = make_dataset(PAIRS, tokenizer, batch_size=4, seed=2, **options)
    counts = [len(_batches(dataset)) for _ in range(3)]  # three shuffled epochs
    assert counts[0] > 0 and counts == [int(dataset.cardinality())] * 3
    uncached = make_dataset(PAIRS, tokenizer, batch_size=4, cache=False, **options)
    assert int(uncached.cardinality()) == tf.data.UNKNOWN_CARDINALITY
    assert len(_batches(uncached)) == counts[0]


def test_fit_with_validation_does_not_run_out_of_data(tokenizer, recwarn):
    import keras

    train = make_dataset(PAIRS, tokenizer, batch_size=8, bucket_boundaries=[4, 7])
    valid = make_dataset(PAIRS[:20], tokenizer, batch_size=8, shuffle=False)
    source = keras.Input([None], dtype="int32", name="source")
    target_in = keras.Input([None], dtype="int32", name="target_in")
    embedded = keras.layers.Embedding(tokenizer.target_vocab_size, 4)(target_in)
    logits = keras.layers.Dense(tokenizer.target_vocab_size)(embedded)
    model = keras.Model({"source": source, "target_in": target_in}, logits)
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(train, validation_data=valid, epochs=2, verbose=0)
    assert not [w for w in recwarn if "ran out of data" in str(w.message)]


def test_encode_pairs_and_argument_checks(tokenizer):
    ids = list(encode_pairs(PAIRS[:2], tokenizer).as_numpy_iterator())
    assert (
        ids[0][0].tolist()
        == tokenizer.source.encode(tf.constant(PAIRS[0][0])).numpy().tolist()
    )
    with pytest.raises(ValueError, match="pad_to_max_length=True needs"):
        make_dataset(PAIRS, tokenizer, pad_to_max_length=True)
    with pytest.raises(ValueError, match="too_long must be one of"):
        make_dataset(PAIRS, tokenizer, too_long="cut")
    with pytest.raises(ValueError, match="bucket_boundaries must be increasing"):
        make_dataset(PAIRS, tokenizer, bucket_boundaries=[5, 3])
    with pytest.raises(ValueError, match="no sentence pairs"):
        make_dataset([], tokenizer)


def test_to_example_adds_start_and_end_and_fits_limits_counts_them():
    inputs, target_out = to_example(tf.constant([9, 8, 7]), tf.constant([5, 6]))
    assert inputs["source"].numpy().tolist() == [9, 8, 7]
    assert inputs["target_in"].numpy().tolist() == [START_ID, 5, 6]
    assert target_out.numpy().tolist() == [5, 6, END_ID]
    # A target of n ids fits max_target_length n + 1: the example's length.
    assert fits_limits(3, 2, 3, 3) and not fits_limits(3, 3, 3, 3)
    assert not fits_limits(4, 2, 3, 3) and fits_limits(99, 99, None, None)
    lengths = tf.constant([1, 2, 3])
    np.testing.assert_array_equal(
        fits_limits(lengths, lengths, 3, 3).numpy(), [True, True, False]
    )


def test_make_dataset_and_the_streamed_stages_keep_the_same_examples(tokenizer):
    """Both pipelines: one length rule, one `to_example`: the same pairs, same ids."""
    limits = {"max_source_length": 5, "max_target_length": 4}
    batches = _batches(
        make_dataset(PAIRS, tokenizer, batch_size=100, shuffle=False, **limits)
    )
    pairs = tf.data.Dataset.from_tensor_slices(
        ([s for s, _ in PAIRS], [t for _, t in PAIRS])
    )
    streamed = list(
        encode_within_limits(pairs, tokenizer, encode_batch_size=7, **limits)
        .map(to_example)
        .as_numpy_iterator()
    )
    ((source, target_in, target_out),) = batches
    assert len(streamed) == len(source) > 0
    for row, (inputs, out) in enumerate(streamed):
        for batch, unpadded in (
            (source, inputs["source"]),
            (target_in, inputs["target_in"]),
            (target_out, out),
        ):
            assert batch[row, : len(unpadded)].tolist() == unpadded.tolist()
            assert not batch[row, len(unpadded) :].any()
