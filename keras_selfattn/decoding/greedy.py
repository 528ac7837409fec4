"""`GreedySearch`: at each step the most likely next token."""

import dataclasses
import numbers

from keras import ops

from keras_selfattn.decoding.search import decode
from keras_selfattn.decoding.strategy import SearchStrategy
from keras_selfattn.decoding.tensors import (
    argmax_of_rows,
    executing_eagerly,
    take_per_sentence,
    unconverted,
    write_column,
)
from keras_selfattn.reserved_ids import END_ID, START_ID


@dataclasses.dataclass(frozen=True)
class GreedySearch(SearchStrategy):
    """At each step the most likely next token (`greedy_decode`).

    ``choose`` picks the tokens: a subclass that samples overrides it alone.

    Args:
        return_attention: also return the attention weights of every step.
    """

    return_attention: bool = False

    @property
    def drops_finished_rows(self):
        """Not with ``return_attention``, whose weights cover every step of
        every row (after a sentence's end too, as the static loop computes them)."""
        return not self.return_attention

    def graph_key(self, max_len):
        if not isinstance(max_len, numbers.Integral):
            return None
        key = ("greedy", int(max_len), bool(self.return_attention))
        return self.own_key(key, GreedySearch)

    def start(self, states, source_ids, max_len):
        batch, source_len = ops.shape(source_ids)
        memory = {
            "scores": ops.zeros([batch], "float32"),
            "lengths": ops.zeros([batch], "int32"),
            "ids": ops.zeros([batch, max_len], "int32"),
        }
        if self.return_attention:
            memory["attention"] = ops.zeros([batch, max_len, source_len], "float32")
        tokens = ops.full([batch], START_ID, "int32")
        return tokens, states, ops.zeros([batch], "bool"), memory

    def before_step(self, model, t, states, memory):
        if not self.return_attention:
            return memory
        weights = model.decoder_attention(states)  # (B, T): the step's attention
        column = ops.one_hot(t, ops.shape(memory["attention"])[1])
        attention = memory["attention"] + weights[:, None, :] * column[None, :, None]
        return {**memory, "attention": attention}

    def choose(self, log_probs, t):
        """(B, W) log-probabilities of step ``t`` -> (B,) int32 positions: the best."""
        return argmax_of_rows(log_probs)

    def step(self, model, t, log_probs, states, finished, memory, output):
        positions = self.choose(log_probs, t)
        chosen = take_per_sentence(log_probs, positions[:, None])[:, 0]
        next_tokens = output.vocabulary_ids(positions)
        next_tokens = ops.where(finished, ops.zeros_like(next_tokens), next_tokens)
        memory = {
            **memory,
            "scores": memory["scores"] + ops.where(finished, 0.0, chosen),
            "lengths": memory["lengths"] + ops.cast(ops.logical_not(finished), "int32"),
            "ids": write_column(memory["ids"], t, next_tokens),
        }
        finished = ops.logical_or(finished, ops.equal(next_tokens, END_ID))
        return next_tokens, states, finished, memory

    def finish(self, t, memory):
        result = {
            "ids": memory["ids"][:, :t],
            "lengths": memory["lengths"],
            "scores": memory["scores"],
        }
        if self.return_attention:
            result["attention"] = memory["attention"][:, :t]
        return result


@unconverted
def greedy_decode(
    model,
    source_ids,
    max_len,
    return_attention=False,
    jit_compile=False,
    output=None,
    max_length_ratio=None,
):
    """Greedy decoding: at each step the most likely next token.

    Args:
        model: a `Seq2Seq` (what `build_seq2seq` returns).
        source_ids: int32 (B, T) source ids, 0-padded.
        max_len: int, the most tokens to produce (the end id included).
        return_attention: also return the attention weights of every step.
        jit_compile: TensorFlow: one XLA program (see `decode`).
        output: the search's output layer (see `decode`; None: the model's).
        max_length_ratio: None (default: off), or each sentence's cap of steps
            relative to its source (the rule: `decode`); a sentence at its cap
            keeps what it produced (lengths = cap, no end id).

    Returns:
        dict with ``ids`` int32 (B, L) (tokens after the end id are 0),
        ``lengths`` int32 (B,) (tokens up to and including the end id),
        ``scores`` float32 (B,) (sum of the chosen tokens' log-probabilities), and
        with ``return_attention`` ``attention`` float32 (B, L, T).
    """
    if executing_eagerly() and isinstance(max_len, numbers.Integral):
        max_len, return_attention = int(max_len), bool(return_attention)
    strategy = GreedySearch(return_attention)
    return decode(
        model, source_ids, strategy, max_len, jit_compile, output, max_length_ratio
    )
