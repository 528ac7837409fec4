"""The in-graph shortlist: the table's ids, the cut output layer, and an argmax
over the shortlist that is the full argmax whenever that one is kept (NumPy
reference)."""

import numpy as np
import tensorflow as tf

from keras_selfattn.models import shortlist_ops


def _table(rng, source_vocab=20, target_vocab=60, width=3):
    candidates = rng.integers(4, target_vocab, (source_vocab, width)).astype(np.int32)
    candidates[0] = 3  # padding: only the end id
    always = np.array([0, 1, 2, 3, 4, 5], np.int32)
    return candidates, always


def test_ids_are_the_sorted_union():
    rng = np.random.default_rng(0)
    candidates, always = _table(rng)
    source = np.array([[7, 9, 0, 0], [9, 11, 12, 0]], np.int32)
    ids = shortlist_ops.shortlist_ids(source, candidates, always, 60).numpy()
    expected = np.union1d(candidates[source.ravel()].ravel(), always)
    np.testing.assert_array_equal(ids, expected)
    # the batch's order does not change it
    again = shortlist_ops.shortlist_ids(source[::-1], candidates, always, 60)
    np.testing.assert_array_equal(again.numpy(), ids)


def test_ids_in_a_graph_with_unknown_shapes():
    rng = np.random.default_rng(1)
    candidates, always = _table(rng)
    fn = tf.function(
        lambda s: shortlist_ops.shortlist_ids(s, candidates, always, 60),
        input_signature=[tf.TensorSpec([None, None], tf.int32)],
    )
    source = np.array([[5, 6]], np.int32)
    np.testing.assert_array_equal(
        fn(source).numpy(), np.union1d(candidates[[5, 6]].ravel(), always)
    )


def test_shortlist_argmax_is_the_full_argmax_when_kept():
    rng = np.random.default_rng(2)
    candidates, always = _table(rng, width=8)
    kernel = rng.normal(size=(16, 60)).astype(np.float32)
    bias = rng.normal(size=60).astype(np.float32)
    hidden = rng.normal(size=(64, 16)).astype(np.float32)
    source = rng.integers(0, 20, (4, 6)).astype(np.int32)
    ids = shortlist_ops.shortlist_ids(source, candidates, always, 60)
    cut_kernel, cut_bias = shortlist_ops.gather_output_layer(kernel, bias, ids)
    logits = shortlist_ops.shortlist_logits(tf.constant(hidden), cut_kernel, cut_bias)
    picked = shortlist_ops.vocabulary_ids(tf.argmax(logits, -1), ids).numpy()
    full = hidden @ kernel + bias  # NumPy reference
    np.testing.assert_allclose(
        logits.numpy(), full[:, ids.numpy()], rtol=1e-5, atol=1e-5
    )
    kept = np.isin(full.argmax(-1), ids.numpy())
    assert kept.any() and not kept.all()  # both cases are exercised
    np.testing.assert_array_equal(picked[kept], full.argmax(-1)[kept])
    # where it is not kept, the pick is the best kept one
    best_kept = ids.numpy()[full[:, ids.numpy()].argmax(-1)]
    np.testing.assert_array_equal(picked, best_kept)


def test_output_layer_weights_of_a_tied_model():
    from keras_selfattn.models import ModelConfig, build_seq2seq

    config = ModelConfig(
        num_hiddens=16,
        num_heads=2,
        num_layers=1,
        ffn_hiddens=16,
        decoder_units=16,
        embedding_dim=16,
        tie_embeddings=True,
        deep_output_hiddens=12,
    )
    model = build_seq2seq(30, 40, config)
    kernel, bias = shortlist_ops.output_layer_weights(model)
    assert tuple(kernel.shape) == (16, 40) and tuple(bias.shape) == (40,)
    hidden = np.random.default_rng(3).normal(size=(5, 16)).astype(np.float32)
    ids = tf.constant([0, 3, 7, 39])
    cut = shortlist_ops.gather_output_layer(kernel, bias, ids)
    logits = shortlist_ops.shortlist_logits(hidden, *cut, deep_output=model.deep_output)
    full = model._logits(tf.constant(hidden)).numpy()
    np.testing.assert_allclose(logits.numpy(), full[:, [0, 3, 7, 39]], atol=1e-5)
    # The shortlist's columns taken from E's rows: the same kernel and bias.
    rows_first = shortlist_ops.output_layer_weights(model, ids)
    for got, want in zip(rows_first, cut, strict=True):
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert tuple(rows_first[0].shape) == (16, 4)
