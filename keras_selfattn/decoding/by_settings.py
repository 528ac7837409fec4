"""`search_with`: the search a `SearchSettings` names, greedy or beam.

The one place that turns a translator's settings into a search: `Translator`
(what it translates and scores), the exported signatures (``serving_default``
greedy, ``translate_nbest`` by beam) and validation all call it.
"""

from keras_selfattn.decoding.beam import beam_search_decode
from keras_selfattn.decoding.greedy import greedy_decode
from keras_selfattn.decoding.tensors import unconverted

__all__ = ["search_with"]


@unconverted
def search_with(
    model,
    source_ids,
    settings,
    max_len,
    *,
    output=None,
    jit_compile=False,
    return_attention=False,
):
    """``greedy_decode`` or ``beam_search_decode`` of ``source_ids``, as
    ``settings`` says.

    Args:
        model: a `Seq2Seq`.
        source_ids: int32 (B, T) source ids, 0-padded.
        settings: a `keras_selfattn.search_settings.SearchSettings`: its
            ``search``, ``beam_size``, ``length_penalty`` and
            ``max_length_ratio`` (its shortlist and precision reach the search
            as ``output``, the output layer built from them).
        max_len: int, the most tokens produced (the end id included).
        output: the search's output layer spec (`decode`'s ``output``).
        jit_compile: compile the search with XLA (`decode`'s).
        return_attention: each step's attention weights (greedy only).

    Returns:
        The search's result dict (`greedy_decode`'s or `beam_search_decode`'s).
    """
    options = {
        "jit_compile": jit_compile,
        "output": output,
        "max_length_ratio": settings.max_length_ratio,
    }
    if settings.search == "greedy":
        return greedy_decode(
            model, source_ids, max_len, return_attention=return_attention, **options
        )
    if return_attention:
        raise ValueError(
            "return_attention is available with greedy search (beam_size=1) only"
        )
    return beam_search_decode(
        model,
        source_ids,
        settings.beam_size,
        max_len,
        alpha=settings.length_penalty,
        **options,
    )
