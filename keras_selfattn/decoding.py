"""Greedy and beam-search decoding of a `build_seq2seq` model, as TensorFlow graph code.

Both searches are one ``tf.while_loop`` each (no Python loop per token, no custom
ops), run the encoder once per sentence, reuse the decoder's projected keys for
every step, stop when every sentence has produced the end id or at ``max_len``,
and work on a whole batch. They are plain functions of tensors, so they can be
called eagerly, inside ``tf.function`` and inside an exported SavedModel. Called
eagerly, a search runs as a graph: a ``tf.function`` traced once per model and
setting (``max_len``, beam size ...) and cached beside the model, for any batch
and source length: op by op, the eager loop was 20-50x slower
(benchmarks/before_after.py).

Token ids are the package's reserved ids (`keras_selfattn.reserved_ids`): 0 padding,
2 start, 3 end. The searches use only the model's decoding API
(`Seq2Seq.initial_decoder_state`, ``decode_step``, ``decoder_attention``,
``reorder_decoder_state``), never its layer names.
"""

import functools
import numbers
import weakref

import tensorflow as tf

from keras_selfattn.reserved_ids import END_ID, PAD_ID, START_ID, UNK_ID  # noqa: F401

_NEG = -1e9  # a finite "minus infinity" for log-probabilities (keeps sums NaN-free)

_GRAPHS = weakref.WeakKeyDictionary()  # model -> {(search, settings): tf.function}


def _cached_graph(model, key, search):
    """The ``tf.function`` of ``search(model, source_ids)`` for ``key``, traced once.

    Its input signature is (None, None) int32: one trace serves every batch size
    and source length. The function holds the model through a weak reference
    (the cache is keyed weakly by the model too), so a cached graph does not
    keep the model alive.
    """
    graphs = _GRAPHS.setdefault(model, {})
    if key not in graphs:
        model_ref = weakref.ref(model)

        def run(source_ids):
            return search(model_ref(), source_ids)

        graphs[key] = tf.function(
            run,
            input_signature=[tf.TensorSpec([None, None], tf.int32, name="source_ids")],
            autograph=False,  # explicit tf.while_loop; nothing to convert
        )
    return graphs[key]


def _no_padding(model):
    """(V,) float32: ``_NEG`` at the padding id, 0 elsewhere (added to the logits)."""
    return tf.one_hot(PAD_ID, model.target_vocab_size, on_value=_NEG, off_value=0.0)


def _step(model, tokens, states, no_padding):
    """One decoder step: (B,) ids -> (B, V) log-probabilities (padding excluded), states."""
    logits, states = model.decode_step(tokens, states, training=False)
    return tf.nn.log_softmax(logits + no_padding), states


def _write_column(buffer, t, values):
    """buffer[:, ..., t] = values, as an XLA-friendly masked add on a zero column."""
    column = tf.one_hot(t, tf.shape(buffer)[-1], dtype=buffer.dtype)
    return buffer + tf.expand_dims(values, -1) * column


def greedy_decode(model, source_ids, max_len, return_attention=False):
    """Greedy decoding: at each step the most likely next token.

    Args:
        model: a `Seq2Seq` (what `build_seq2seq` returns).
        source_ids: int32 (B, T) source ids, 0-padded.
        max_len: int, the most tokens to produce (the end id included).
        return_attention: also return the attention weights of every step.

    Returns:
        dict with ``ids`` int32 (B, L) (tokens after the end id are 0),
        ``lengths`` int32 (B,) (tokens up to and including the end id),
        ``scores`` float32 (B,) (sum of the chosen tokens' log-probabilities), and
        with ``return_attention`` ``attention`` float32 (B, L, T).
    """
    source_ids = tf.convert_to_tensor(source_ids, tf.int32)
    if tf.executing_eagerly() and isinstance(max_len, numbers.Integral):
        max_len, return_attention = int(max_len), bool(return_attention)
        search = _cached_graph(
            model,
            ("greedy", max_len, return_attention),
            functools.partial(
                _greedy_search, max_len=max_len, return_attention=return_attention
            ),
        )
        return search(source_ids)
    return _greedy_search(model, source_ids, max_len, return_attention)


def _greedy_search(model, source_ids, max_len, return_attention):
    batch, source_len = tf.shape(source_ids)[0], tf.shape(source_ids)[1]
    states = model.initial_decoder_state(source_ids)
    no_padding = _no_padding(model)

    def body(t, tokens, states, finished, scores, lengths, ids, attention):
        if return_attention:
            weights = model.decoder_attention(states)  # (B, T)
            attention = (
                attention + weights[:, None, :] * tf.one_hot(t, max_len)[None, :, None]
            )
        log_probs, states = _step(model, tokens, states, no_padding)
        next_tokens = tf.argmax(log_probs, axis=-1, output_type=tf.int32)
        chosen = tf.gather(log_probs, next_tokens, batch_dims=1)
        next_tokens = tf.where(finished, PAD_ID, next_tokens)
        scores += tf.where(finished, 0.0, chosen)
        lengths += tf.cast(~finished, tf.int32)
        finished |= tf.equal(next_tokens, END_ID)
        ids = _write_column(ids, t, next_tokens)
        return t + 1, next_tokens, states, finished, scores, lengths, ids, attention

    def cond(t, tokens, states, finished, *_):
        return tf.logical_and(t < max_len, tf.logical_not(tf.reduce_all(finished)))

    loop_vars = (
        tf.constant(0),
        tf.fill([batch], START_ID),
        states,
        tf.zeros([batch], tf.bool),
        tf.zeros([batch], tf.float32),
        tf.zeros([batch], tf.int32),
        tf.zeros([batch, max_len], tf.int32),
        tf.zeros([batch, max_len, source_len], tf.float32)
        if return_attention
        else tf.zeros([]),
    )
    t, _, _, _, scores, lengths, ids, attention = tf.while_loop(cond, body, loop_vars)
    result = {"ids": ids[:, :t], "lengths": lengths, "scores": scores}
    if return_attention:
        result["attention"] = attention[:, :t]
    return result


def length_penalty(lengths, alpha):
    """GNMT's length normalizer ((5 + length) / 6) ** alpha (Wu et al. 2016)."""
    return tf.pow((5.0 + tf.cast(lengths, tf.float32)) / 6.0, alpha)


def beam_search_decode(model, source_ids, beam_size, max_len, alpha=0.6):
    """Beam search with length normalization applied at every step.

    At each step every kept hypothesis is extended by every token, and the
    ``beam_size`` candidates with the best normalized score
    ``log_prob / length_penalty(length, alpha)`` survive, ``length`` counting the
    candidate's tokens (the end id included), as GNMT (Wu et al. 2016) and
    OpenNMT-tf do. A finished hypothesis is carried on unchanged, with its score.
    Normalizing only after the search would prune long hypotheses by raw
    log-probability before the normalization could help them
    (benchmarks/RESULTS.md, "Beam search: length penalty"). ``alpha=0``: plain
    log-probability, no normalization.

    Args:
        model: a `Seq2Seq` (what `build_seq2seq` returns).
        source_ids: int32 (B, T) source ids, 0-padded.
        beam_size: int, hypotheses kept per sentence.
        max_len: int, the most tokens to produce (the end id included).
        alpha: float, strength of the length normalization.

    Returns:
        dict, best first along axis 1: ``ids`` int32 (B, K, L), ``lengths`` int32
        (B, K), ``scores`` float32 (B, K) (normalized), ``log_probs`` float32 (B, K).
    """
    if beam_size < 1:
        raise ValueError(
            f"beam_size must be at least 1. Received: beam_size={beam_size}"
        )
    source_ids = tf.convert_to_tensor(source_ids, tf.int32)
    if (
        tf.executing_eagerly()
        and isinstance(max_len, numbers.Integral)
        and isinstance(alpha, numbers.Real)
    ):
        max_len, beam_size, alpha = int(max_len), int(beam_size), float(alpha)
        search = _cached_graph(
            model,
            ("beam", beam_size, max_len, alpha),
            functools.partial(
                _beam_search, beam_size=beam_size, max_len=max_len, alpha=alpha
            ),
        )
        return search(source_ids)
    return _beam_search(model, source_ids, beam_size, max_len, alpha)


def _beam_search(
    model, source_ids, beam_size, max_len, alpha, penalty_during_search=True
):
    """The search. ``penalty_during_search=False`` ranks the candidates of each step
    by raw log-probability and normalizes only at the end: the behaviour before the
    penalty moved into the search, kept for benchmarks/beam_length_penalty.py."""
    batch = tf.shape(source_ids)[0]
    k = beam_size
    states = [
        tf.repeat(s, k, axis=0) for s in model.initial_decoder_state(source_ids)
    ]  # (B*K, ...)
    no_padding = _no_padding(model)

    def body(t, tokens, states, finished, log_probs, lengths, ids):
        step_log_probs, states = _step(model, tokens, states, no_padding)
        vocab = tf.shape(step_log_probs)[-1]
        step_log_probs = tf.reshape(step_log_probs, [batch, k, vocab])
        # A finished hypothesis may only continue with padding, at no cost.
        pad_only = tf.one_hot(PAD_ID, vocab, on_value=0.0, off_value=_NEG)
        step_log_probs = tf.where(
            finished[:, :, None], pad_only[None, None], step_log_probs
        )
        total = tf.reshape(log_probs[:, :, None] + step_log_probs, [batch, k * vocab])
        if penalty_during_search:
            # Every candidate of a hypothesis is one token longer, unless the
            # hypothesis is finished (it only continues with free padding).
            candidate_lengths = lengths + tf.cast(~finished, tf.int32)  # (B, K)
            penalty = tf.repeat(length_penalty(candidate_lengths, alpha), vocab, axis=1)
            _, flat = tf.math.top_k(total / penalty, k)
            log_probs = tf.gather(total, flat, batch_dims=1)
        else:
            log_probs, flat = tf.math.top_k(total, k)
        parent, next_tokens = flat // vocab, flat % vocab
        was_finished = tf.gather(finished, parent, batch_dims=1)
        lengths = tf.gather(lengths, parent, batch_dims=1) + tf.cast(
            ~was_finished, tf.int32
        )
        finished = was_finished | tf.equal(next_tokens, END_ID)
        ids = _write_column(tf.gather(ids, parent, batch_dims=1), t, next_tokens)
        rows = tf.reshape(parent + k * tf.range(batch)[:, None], [-1])
        # (The gather forgets a static batch size; keep each state's shape so that
        # a tf.function traced with a fixed batch passes tf.while_loop's check.)
        states = [
            tf.ensure_shape(new, old.shape)
            for new, old in zip(model.reorder_decoder_state(states, rows), states)
        ]
        return (
            t + 1,
            tf.reshape(next_tokens, [-1]),
            states,
            finished,
            log_probs,
            lengths,
            ids,
        )

    def cond(t, tokens, states, finished, *_):
        return tf.logical_and(t < max_len, tf.logical_not(tf.reduce_all(finished)))

    first_beam_only = tf.concat([tf.zeros([1]), tf.fill([k - 1], _NEG)], 0)
    loop_vars = (
        tf.constant(0),
        tf.fill([batch * k], START_ID),
        states,
        tf.zeros([batch, k], tf.bool),
        tf.tile(first_beam_only[None], [batch, 1]),
        tf.zeros([batch, k], tf.int32),
        tf.zeros([batch, k, max_len], tf.int32),
    )
    t, _, _, _, log_probs, lengths, ids = tf.while_loop(cond, body, loop_vars)
    scores = log_probs / length_penalty(lengths, alpha)
    order = tf.argsort(scores, axis=1, direction="DESCENDING")
    return {
        "ids": tf.gather(ids[:, :, :t], order, batch_dims=1),
        "lengths": tf.gather(lengths, order, batch_dims=1),
        "scores": tf.gather(scores, order, batch_dims=1),
        "log_probs": tf.gather(log_probs, order, batch_dims=1),
    }
