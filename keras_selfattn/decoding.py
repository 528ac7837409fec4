"""Greedy and beam-search decoding of a `build_seq2seq` model, as TensorFlow graph code.

One loop, `decode`, runs every search: it runs the encoder once per sentence,
feeds the decoder one token a step (reusing its projected keys), and stops when
every sentence has produced the end id or at ``max_len``, on a whole batch, as
one ``tf.while_loop`` (no Python loop per token, no custom ops). What differs
between searches is a strategy (as OpenNMT-tf's ``dynamic_decode`` takes a
``DecodingStrategy``): how the loop starts, which tokens a step keeps, and what
the search returns. `GreedySearch` keeps the most likely token, `BeamSearch` the
best ``beam_size`` hypotheses; sampling would be one more strategy, not another
loop. `greedy_decode` and `beam_search_decode` are the two searches by name.

The searches are plain functions of tensors, so they can be called eagerly,
inside ``tf.function`` and inside an exported SavedModel. Called eagerly, a
search runs as a graph: a ``tf.function`` traced once per model and setting
(``max_len``, beam size ...) and cached beside the model, for any batch and
source length: op by op, the eager loop was 20-50x slower
(benchmarks/before_after.py).

Token ids are the package's reserved ids (`keras_selfattn.reserved_ids`): 0 padding,
2 start, 3 end. The searches use only the model's decoding API
(`Seq2Seq.initial_decoder_state`, ``decode_step``, ``decoder_attention``,
``reorder_decoder_state``), never its layer names.
"""

import dataclasses
import functools
import numbers
import weakref

import tensorflow as tf

from keras_selfattn.choices import DEFAULT_BEAM_SIZE, DEFAULT_LENGTH_PENALTY
from keras_selfattn.reserved_ids import END_ID, PAD_ID, START_ID

__all__ = [
    "DEFAULT_BEAM_SIZE",
    "DEFAULT_LENGTH_PENALTY",
    "BeamSearch",
    "GreedySearch",
    "beam_search_decode",
    "decode",
    "greedy_decode",
    "length_penalty",
]

# The beam search defaults of every caller (translate, evaluate, the served
# signatures, export): the beam width, and the length normalization strength
# alpha of GNMT's penalty ((5 + length) / 6) ** alpha (Wu et al. 2016 use 0.6).

_NEG = -1e9  # a finite "minus infinity" for log-probabilities (keeps sums NaN-free)

_GRAPHS = weakref.WeakKeyDictionary()  # model -> {graph_key: tf.function}


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


def _write_column(buffer, t, values):
    """buffer[:, ..., t] = values, as an XLA-friendly masked add on a zero column."""
    column = tf.one_hot(t, tf.shape(buffer)[-1], dtype=buffer.dtype)
    return buffer + tf.expand_dims(values, -1) * column


def _graph_key(strategy, key):
    """The two searches by their short keys; a subclass by itself and the key, so
    that its graph never stands in for its parent's (it must be hashable: a frozen
    dataclass is)."""
    return key if type(strategy) in (GreedySearch, BeamSearch) else (strategy, key)


def decode(model, source_ids, strategy, max_len):
    """Runs the decoder step by step, choosing tokens with ``strategy``.

    Args:
        model: a `Seq2Seq` (what `build_seq2seq` returns).
        source_ids: int32 (B, T) source ids, 0-padded.
        strategy: a `GreedySearch` or `BeamSearch` (or any object with their
            ``initialize``, ``step``, ``finalize`` and ``graph_key``).
        max_len: int, the most tokens to produce (the end id included).

    Returns:
        the strategy's result (see `greedy_decode`, `beam_search_decode`).
    """
    source_ids = tf.convert_to_tensor(source_ids, tf.int32)
    key = strategy.graph_key(max_len)
    if tf.executing_eagerly() and key is not None:
        search = _cached_graph(
            model, key, functools.partial(_decode, strategy=strategy, max_len=max_len)
        )
        return search(source_ids)
    return _decode(model, source_ids, strategy, max_len)


def _decode(model, source_ids, strategy, max_len):
    """The loop: start tokens, one decoder step a turn, until all finish or max_len."""
    tokens, states, finished, memory = strategy.initialize(
        model.initial_decoder_state(source_ids), source_ids, max_len
    )
    no_padding = _no_padding(model)

    def body(t, tokens, states, finished, memory):
        memory = strategy.before_step(model, t, states, memory)
        logits, states = model.decode_step(tokens, states, training=False)
        log_probs = tf.nn.log_softmax(logits + no_padding)  # padding never chosen
        tokens, states, finished, memory = strategy.step(
            model, t, log_probs, states, finished, memory
        )
        return t + 1, tokens, states, finished, memory

    def cond(t, tokens, states, finished, memory):
        return tf.logical_and(t < max_len, tf.logical_not(tf.reduce_all(finished)))

    t, _, _, _, memory = tf.while_loop(
        cond, body, (tf.constant(0), tokens, states, finished, memory)
    )
    return strategy.finalize(t, memory)


@dataclasses.dataclass(frozen=True)
class GreedySearch:
    """At each step the most likely next token (`greedy_decode`).

    A strategy of `decode`: ``initialize`` gives the loop's first tokens,
    states, ``finished`` flags and the strategy's own tensors (``memory``);
    ``before_step`` and ``step`` update them around each decoder step;
    ``finalize`` makes the result. ``graph_key`` names the cached graph (None:
    do not cache). ``choose`` picks the tokens: a subclass that samples
    overrides it alone.

    Args:
        return_attention: also return the attention weights of every step.
    """

    return_attention: bool = False

    def graph_key(self, max_len):
        if not isinstance(max_len, numbers.Integral):
            return None
        return _graph_key(self, ("greedy", int(max_len), bool(self.return_attention)))

    def initialize(self, states, source_ids, max_len):
        batch, source_len = tf.shape(source_ids)[0], tf.shape(source_ids)[1]
        memory = {
            "scores": tf.zeros([batch], tf.float32),
            "lengths": tf.zeros([batch], tf.int32),
            "ids": tf.zeros([batch, max_len], tf.int32),
        }
        if self.return_attention:
            memory["attention"] = tf.zeros([batch, max_len, source_len], tf.float32)
        tokens = tf.fill([batch], START_ID)
        return tokens, states, tf.zeros([batch], tf.bool), memory

    def before_step(self, model, t, states, memory):
        if not self.return_attention:
            return memory
        weights = model.decoder_attention(states)  # (B, T): the step's attention
        column = tf.one_hot(t, tf.shape(memory["attention"])[1])
        attention = memory["attention"] + weights[:, None, :] * column[None, :, None]
        return {**memory, "attention": attention}

    def choose(self, log_probs, t):
        """(B, V) log-probabilities of step ``t`` -> (B,) int32 tokens: the best."""
        return tf.argmax(log_probs, axis=-1, output_type=tf.int32)

    def step(self, model, t, log_probs, states, finished, memory):
        next_tokens = self.choose(log_probs, t)
        chosen = tf.gather(log_probs, next_tokens, batch_dims=1)
        next_tokens = tf.where(finished, PAD_ID, next_tokens)
        memory = {
            **memory,
            "scores": memory["scores"] + tf.where(finished, 0.0, chosen),
            "lengths": memory["lengths"] + tf.cast(~finished, tf.int32),
            "ids": _write_column(memory["ids"], t, next_tokens),
        }
        finished |= tf.equal(next_tokens, END_ID)
        return next_tokens, states, finished, memory

    def finalize(self, t, memory):
        result = {
            "ids": memory["ids"][:, :t],
            "lengths": memory["lengths"],
            "scores": memory["scores"],
        }
        if self.return_attention:
            result["attention"] = memory["attention"][:, :t]
        return result


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
    if tf.executing_eagerly() and isinstance(max_len, numbers.Integral):
        max_len, return_attention = int(max_len), bool(return_attention)
    return decode(model, source_ids, GreedySearch(return_attention), max_len)


def length_penalty(lengths, alpha):
    """GNMT's length normalizer ((5 + length) / 6) ** alpha (Wu et al. 2016)."""
    return tf.pow((5.0 + tf.cast(lengths, tf.float32)) / 6.0, alpha)


@dataclasses.dataclass(frozen=True)
class BeamSearch:
    """The best ``beam_size`` hypotheses, length-normalized at every step.

    A strategy of `decode` (see `GreedySearch` for the methods); what it
    computes is described in `beam_search_decode`. The decoder runs on
    ``B * beam_size`` rows; the states follow their hypotheses through
    ``model.reorder_decoder_state``.

    Args:
        beam_size: int, hypotheses kept per sentence.
        alpha: float, strength of the length normalization (0: none).
    """

    beam_size: int
    alpha: float = DEFAULT_LENGTH_PENALTY

    def __post_init__(self):
        if self.beam_size < 1:
            raise ValueError(
                f"beam_size must be at least 1. Received: beam_size={self.beam_size}"
            )

    def graph_key(self, max_len):
        if not (
            isinstance(max_len, numbers.Integral)
            and isinstance(self.alpha, numbers.Real)
        ):
            return None
        key = ("beam", int(self.beam_size), int(max_len), float(self.alpha))
        return _graph_key(self, key)

    def initialize(self, states, source_ids, max_len):
        batch, k = tf.shape(source_ids)[0], self.beam_size
        states = [tf.repeat(s, k, axis=0) for s in states]  # (B*K, ...)
        first_beam_only = tf.concat([tf.zeros([1]), tf.fill([k - 1], _NEG)], 0)
        memory = {
            "log_probs": tf.tile(first_beam_only[None], [batch, 1]),
            "lengths": tf.zeros([batch, k], tf.int32),
            "ids": tf.zeros([batch, k, max_len], tf.int32),
        }
        tokens = tf.fill([batch * k], START_ID)
        return tokens, states, tf.zeros([batch, k], tf.bool), memory

    def before_step(self, model, t, states, memory):
        return memory

    def candidate_scores(self, total, lengths, finished):
        """What ranks the (B, K, V) candidates: log-probability over the penalty.

        Every candidate of a hypothesis is one token longer, unless the
        hypothesis is finished (it only continues with free padding).
        """
        candidate_lengths = lengths + tf.cast(~finished, tf.int32)  # (B, K)
        return total / length_penalty(candidate_lengths, self.alpha)[:, :, None]

    def step(self, model, t, log_probs, states, finished, memory):
        k = self.beam_size
        vocab = tf.shape(log_probs)[-1]
        batch = tf.shape(finished)[0]
        step_log_probs = tf.reshape(log_probs, [batch, k, vocab])
        # A finished hypothesis may only continue with padding, at no cost.
        pad_only = tf.one_hot(PAD_ID, vocab, on_value=0.0, off_value=_NEG)
        step_log_probs = tf.where(
            finished[:, :, None], pad_only[None, None], step_log_probs
        )
        total = memory["log_probs"][:, :, None] + step_log_probs  # (B, K, V)
        ranked = self.candidate_scores(total, memory["lengths"], finished)
        _, flat = tf.math.top_k(tf.reshape(ranked, [batch, k * vocab]), k)
        parent, next_tokens = flat // vocab, flat % vocab
        was_finished = tf.gather(finished, parent, batch_dims=1)
        total = tf.reshape(total, [batch, k * vocab])
        memory = {
            "log_probs": tf.gather(total, flat, batch_dims=1),
            "lengths": tf.gather(memory["lengths"], parent, batch_dims=1)
            + tf.cast(~was_finished, tf.int32),
            "ids": _write_column(
                tf.gather(memory["ids"], parent, batch_dims=1), t, next_tokens
            ),
        }
        rows = tf.reshape(parent + k * tf.range(batch)[:, None], [-1])
        # (The gather forgets a static batch size; keep each state's shape so that
        # a tf.function traced with a fixed batch passes tf.while_loop's check.)
        states = [
            tf.ensure_shape(new, old.shape)
            for new, old in zip(model.reorder_decoder_state(states, rows), states)
        ]
        finished = was_finished | tf.equal(next_tokens, END_ID)
        return tf.reshape(next_tokens, [-1]), states, finished, memory

    def finalize(self, t, memory):
        log_probs, lengths = memory["log_probs"], memory["lengths"]
        scores = log_probs / length_penalty(lengths, self.alpha)
        order = tf.argsort(scores, axis=1, direction="DESCENDING")
        return {
            "ids": tf.gather(memory["ids"][:, :, :t], order, batch_dims=1),
            "lengths": tf.gather(lengths, order, batch_dims=1),
            "scores": tf.gather(scores, order, batch_dims=1),
            "log_probs": tf.gather(log_probs, order, batch_dims=1),
        }


def beam_search_decode(
    model, source_ids, beam_size, max_len, alpha=DEFAULT_LENGTH_PENALTY
):
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
    if (
        tf.executing_eagerly()
        and isinstance(max_len, numbers.Integral)
        and isinstance(alpha, numbers.Real)
    ):
        max_len, beam_size, alpha = int(max_len), int(beam_size), float(alpha)
    return decode(model, source_ids, BeamSearch(beam_size, alpha), max_len)
