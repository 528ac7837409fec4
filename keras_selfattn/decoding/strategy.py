"""`SearchStrategy`: what a search does at the start, at each step, at the end.

The loop (`keras_selfattn.decoding.loop`) is the same for every search, as
OpenNMT-tf's ``dynamic_decode`` takes a ``DecodingStrategy`` and keras-hub's
``Sampler`` subclasses override one hook: a strategy says how the loop starts
(`start`), which tokens a step keeps (`step`) and what the search returns
(`finish`).
"""

from keras import ops


class SearchStrategy:
    """The base of the searches `decode` runs (`GreedySearch`, `BeamSearch`).

    A subclass must be hashable (a frozen dataclass is): it keys the graph
    cached for it.
    """

    # Whether a sentence whose search has ended stays as it is at every later
    # step, so that a TensorFlow loop may stop computing its rows
    # (`keras_selfattn.decoding.tensorflow_loops`). False: every row, every step.
    drops_finished_rows = False

    def graph_key(self, max_len):
        """A hashable name of this search's cached graph; None (the default):
        do not cache."""

    def own_key(self, key, search_class):
        """``key`` for ``search_class`` itself; ``(self, key)`` for a subclass,
        so that a subclass's graph never stands in for its parent's."""
        return key if type(self) is search_class else (self, key)

    def start(self, states, source_ids, max_len):
        """``(tokens, states, finished, memory)`` of the loop's first step.

        ``states`` are the model's initial decoder states; ``memory`` is a dict
        of the strategy's own tensors."""
        raise NotImplementedError

    def before_step(self, model, t, states, memory):
        """``memory`` updated before the decoder step ``t`` (default: as it is)."""
        return memory

    def log_probabilities(self, model, tokens, states, output):
        """``(log_probs, states)``: the decoder step on ``tokens`` and the
        float32 (rows, W) log-probabilities of the next tokens over the width
        of ``output`` (the bound `SearchLogits`: the whole vocabulary, or a
        shortlist), padding never chosen. Every search forms its logits here."""
        logits, states = model.decode_step(
            tokens, states, training=False, logits_of=output.logits_of
        )
        return ops.log_softmax(logits + output.no_padding), states

    def step(self, model, t, log_probs, states, finished, memory, output):
        """``(tokens, states, finished, memory)`` after choosing step ``t``'s
        tokens from the (rows, W) ``log_probs``: positions in ``output``'s
        logits, whose vocabulary ids (``output.vocabulary_ids``) are the
        tokens fed back, written and tested for the end id."""
        raise NotImplementedError

    def finish(self, t, memory):
        """The search's result after ``t`` steps."""
        raise NotImplementedError
