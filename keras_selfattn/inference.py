"""Using a trained run: `Translator` (greedy or beam) and `evaluate` (sacrebleu,
exact match).

`evaluate` scores the text the user gets (`Translation.text`, detokenized in the
graph by the target tokenizer, the same code the exported model serves) against
the references as written, which is sacrebleu's convention.

This is the public name of the two modules below training that hold the code:
`keras_selfattn.translation` (`Translator`, `Translation`, `ModelFileError`,
`source_ids_for_model`) and `keras_selfattn.scoring` (`evaluate`,
`format_metrics`). They sit below `keras_selfattn.training` because validation
during training translates and scores with them, and no module imports one above
it (import direction follows the data: text -> model -> training -> inference ->
serving -> command line).

`load_translator` is a run's `Translator` with the served options, as the
command line's ``translate`` and ``evaluate`` and the distillation jobs load it.
"""

from keras_selfattn.scoring import evaluate, format_metrics
from keras_selfattn.search_settings import SearchSettings
from keras_selfattn.translation import (
    ModelFileError,
    Translation,
    Translator,
    source_ids_for_model,
)

__all__ = [
    "ModelFileError",
    "SearchSettings",
    "Translation",
    "Translator",
    "evaluate",
    "format_metrics",
    "load_translator",
    "source_ids_for_model",
]


def load_translator(
    run_dir, precision="float32", quantize=None, shortlist=None, max_length_ratio=None
):
    """The `Translator` of a trained run directory; ``precision``,
    ``quantize``, ``shortlist`` (N: the run's table of the N most frequent
    target pieces, ``RUN_DIR/shortlist.npz``) and ``max_length_ratio`` as
    `SearchSettings` takes them."""
    return Translator.load(
        run_dir,
        precision=precision,
        quantize=quantize,
        shortlist=shortlist,
        max_length_ratio=max_length_ratio,
    )
