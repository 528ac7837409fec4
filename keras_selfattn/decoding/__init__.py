"""Greedy and beam-search decoding of a `build_seq2seq` model, on ``keras.ops``.

A search runs the encoder once per sentence, feeds the decoder one token a step
(reusing its projected keys), and stops when every sentence has produced the
end id or at ``max_len``, on a whole batch, in a while loop (no Python loop per
token, no custom ops). With ``max_length_ratio`` each sentence also stops at a
cap relative to its source's length (`decode`; `LENGTH_CAP_MARGIN`).
What differs between searches is a `SearchStrategy` (as
OpenNMT-tf's ``dynamic_decode`` takes a ``DecodingStrategy``): how the loop
starts, which tokens a step keeps, and what the search returns. `GreedySearch`
keeps the most likely token, `BeamSearch` the best ``beam_size`` hypotheses;
sampling would be one more strategy, not another loop. `greedy_decode` and
`beam_search_decode` are the two searches by name; `decode` runs any strategy;
`search_with` runs the one a `keras_selfattn.search_settings.SearchSettings`
names (the translator's and the export's).

How the loop runs depends on the backend:

- JAX: one ``keras.ops.while_loop`` (`loop.run_loop`) under ``jax.jit``, with
  the model's variables passed in as arguments (``keras.StatelessScope``, so a
  model that keeps training decodes with its current weights); one jitted
  function is cached per model and setting, and JAX compiles it once per batch
  size and source length. The result is trimmed to the steps taken after the
  jitted loop. ``max_len`` and the beam size must be Python integers.
- TensorFlow: called eagerly, a search runs as a ``tf.function`` traced once
  per model and setting and cached beside the model (op by op, the eager loop
  was many times slower: benchmarks/RESULTS.md, "What the profile found"). A
  strategy whose ended sentences stay as they are (``drops_finished_rows``)
  runs a loop that drops those sentences' rows
  (`tensorflow_loops.loop_dropping_finished`), or with ``jit_compile=True`` XLA
  stages of a few row counts
  (`tensorflow_loops.loop_in_xla_stages`); any other runs the static loop. The
  tokens are the same.

Token ids are the package's reserved ids (`keras_selfattn.reserved_ids`): 0
padding, 2 start, 3 end. The searches use only the model's decoding API
(`Seq2Seq.initial_decoder_state`, ``decode_step``, ``decoder_attention``,
``reorder_decoder_state``, the optional ``decoding_invariants``), never its
layer names.
"""

from keras_selfattn.choices import (
    DEFAULT_BEAM_SIZE,
    DEFAULT_LENGTH_PENALTY,
    LENGTH_CAP_MARGIN,
)
from keras_selfattn.decoding.beam import BeamSearch, beam_search_decode, length_penalty
from keras_selfattn.decoding.by_settings import search_with
from keras_selfattn.decoding.greedy import GreedySearch, greedy_decode
from keras_selfattn.decoding.loop import LoopState
from keras_selfattn.decoding.search import decode
from keras_selfattn.decoding.strategy import SearchStrategy
from keras_selfattn.reserved_ids import END_ID, PAD_ID, START_ID

__all__ = [
    "DEFAULT_BEAM_SIZE",
    "DEFAULT_LENGTH_PENALTY",
    "END_ID",
    "LENGTH_CAP_MARGIN",
    "PAD_ID",
    "START_ID",
    "BeamSearch",
    "GreedySearch",
    "LoopState",
    "SearchStrategy",
    "beam_search_decode",
    "decode",
    "greedy_decode",
    "length_penalty",
    "search_with",
]
