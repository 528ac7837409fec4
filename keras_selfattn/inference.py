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
    "source_ids_for_model",
]
