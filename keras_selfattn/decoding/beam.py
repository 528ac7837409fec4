"""`BeamSearch`: the best ``beam_size`` hypotheses, length-normalized at every
step (GNMT's penalty inside the beam, only each hypothesis' K best formed)."""

import dataclasses
import numbers

import numpy as np
from keras import ops

from keras_selfattn.choices import DEFAULT_LENGTH_PENALTY
from keras_selfattn.decoding.search import decode
from keras_selfattn.decoding.strategy import SearchStrategy
from keras_selfattn.decoding.tensors import (
    NEG,
    executing_eagerly,
    first_only,
    keep_shape,
    take_per_sentence,
    top_k_of_rows,
    unconverted,
    write_column,
)
from keras_selfattn.reserved_ids import END_ID, PAD_ID, START_ID


def length_penalty(lengths, alpha):
    """GNMT's length normalizer ((5 + length) / 6) ** alpha (Wu et al. 2016)."""
    return ops.power((5.0 + ops.cast(lengths, "float32")) / 6.0, alpha)


@dataclasses.dataclass(frozen=True)
class BeamSearch(SearchStrategy):
    """The best ``beam_size`` hypotheses, length-normalized at every step.

    What it computes is described in `beam_search_decode`. The decoder runs on
    ``B * beam_size`` rows; the states follow their hypotheses through
    ``model.reorder_decoder_state``.

    Args:
        beam_size: int, hypotheses kept per sentence.
        alpha: float, strength of the length normalization (0: none).
    """

    beam_size: int
    alpha: float = DEFAULT_LENGTH_PENALTY
    # A sentence whose K hypotheses have all ended keeps those K at every later
    # step, so a TensorFlow loop may drop it.
    drops_finished_rows = True

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
        return self.own_key(key, BeamSearch)

    def start(self, states, source_ids, max_len):
        batch, k = ops.shape(source_ids)[0], self.beam_size
        states = [ops.repeat(s, k, axis=0) for s in states]  # (B*K, ...)
        first_beam_only = np.full([1, k], NEG, "float32")
        first_beam_only[0, 0] = 0.0
        memory = {
            "log_probs": ops.tile(ops.convert_to_tensor(first_beam_only), [batch, 1]),
            "lengths": ops.zeros([batch, k], "int32"),
            "ids": ops.zeros([batch, k, max_len], "int32"),
        }
        tokens = ops.full([batch * k], START_ID, "int32")
        return tokens, states, ops.zeros([batch, k], "bool"), memory

    def candidate_scores(self, total, lengths, finished):
        """What ranks the (B, K, C) candidates: log-probability over the penalty.

        ``total``: the log-probabilities of each hypothesis' C best
        continuations (C = min(beam size, the output's least width)). Every
        candidate of a hypothesis is one token longer, unless the hypothesis
        is finished (it only continues with free padding). An override must
        rank the candidates of one hypothesis in the order of their
        log-probability (as any per-hypothesis normalization does): the
        search only forms each hypothesis' C best tokens, which then hold
        every candidate that can survive.
        """
        candidate_lengths = lengths + ops.cast(ops.logical_not(finished), "int32")
        return total / length_penalty(candidate_lengths, self.alpha)[:, :, None]

    def step(self, model, t, log_probs, states, finished, memory, output):
        k = self.beam_size
        batch = ops.shape(finished)[0]
        # Only a hypothesis' `width` best tokens can survive: the ranking is
        # monotone in the log-probability within a hypothesis (see
        # `candidate_scores`), so the (B, K, W) candidates are never formed.
        width = min(k, output.least_width)
        best, positions = top_k_of_rows(log_probs, width, output.width)
        best = ops.reshape(best, [batch, k, width])
        tokens = ops.reshape(output.vocabulary_ids(positions), [batch, k, width])
        # A finished hypothesis may only continue with padding, at no cost.
        free = first_only(width)
        finished_3d = finished[:, :, None]
        best = ops.where(finished_3d, ops.where(free, 0.0, NEG), best)
        tokens = ops.where(ops.logical_and(finished_3d, free), PAD_ID, tokens)
        total = memory["log_probs"][:, :, None] + best  # (B, K, width)
        ranked = self.candidate_scores(total, memory["lengths"], finished)
        _, flat = ops.top_k(ops.reshape(ranked, [batch, k * width]), k)
        flat = ops.cast(flat, "int32")
        parent = flat // width
        next_tokens = take_per_sentence(ops.reshape(tokens, [batch, k * width]), flat)
        was_finished = take_per_sentence(finished, parent)
        total = ops.reshape(total, [batch, k * width])
        memory = {
            "log_probs": take_per_sentence(total, flat),
            "lengths": take_per_sentence(memory["lengths"], parent)
            + ops.cast(ops.logical_not(was_finished), "int32"),
            "ids": write_column(
                take_per_sentence(memory["ids"], parent), t, next_tokens
            ),
        }
        rows = ops.reshape(parent + k * ops.arange(batch, dtype="int32")[:, None], [-1])
        states = [
            keep_shape(new, old)
            for new, old in zip(model.reorder_decoder_state(states, rows), states)
        ]
        finished = ops.logical_or(was_finished, ops.equal(next_tokens, END_ID))
        return ops.reshape(next_tokens, [-1]), states, finished, memory

    def finish(self, t, memory):
        log_probs, lengths = memory["log_probs"], memory["lengths"]
        scores = log_probs / length_penalty(lengths, self.alpha)
        # Best first (top_k over all K: what a descending argsort is in TF).
        _, order = ops.top_k(scores, self.beam_size)
        return {
            "ids": take_per_sentence(memory["ids"][:, :, :t], order),
            "lengths": take_per_sentence(lengths, order),
            "scores": take_per_sentence(scores, order),
            "log_probs": take_per_sentence(log_probs, order),
        }


@unconverted
def beam_search_decode(
    model,
    source_ids,
    beam_size,
    max_len,
    alpha=DEFAULT_LENGTH_PENALTY,
    jit_compile=False,
    output=None,
    max_length_ratio=None,
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
        jit_compile: TensorFlow: one XLA program (see `decode`).
        output: the search's output layer (see `decode`; None: the model's).
        max_length_ratio: None (default: off), or each sentence's cap of steps
            relative to its source (the rule: `decode`); a sentence at its cap
            keeps its K hypotheses as they stand, ranked as at any search's end.

    Returns:
        dict, best first along axis 1: ``ids`` int32 (B, K, L), ``lengths`` int32
        (B, K), ``scores`` float32 (B, K) (normalized), ``log_probs`` float32 (B, K).
    """
    if (
        executing_eagerly()
        and isinstance(max_len, numbers.Integral)
        and isinstance(alpha, numbers.Real)
    ):
        max_len, beam_size, alpha = int(max_len), int(beam_size), float(alpha)
    strategy = BeamSearch(beam_size, alpha)
    return decode(
        model, source_ids, strategy, max_len, jit_compile, output, max_length_ratio
    )
