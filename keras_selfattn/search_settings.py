"""`SearchSettings`: a served search's settings, one value, checked once.

The search (greedy or beam), the beam's width and length penalty, each
sentence's length cap, the vocabulary shortlist's size and the products'
precision and int8 weights: what `Translator` translates with, what `evaluate`
scores and what an export serves (`keras_selfattn.serving.export_run`). The
command line builds it once from its flags (`keras_selfattn.cli.search_options`);
a Python caller builds it, or passes its fields as keywords to
`inference.load_translator` and `export_run`. Every field is checked here, in
`__post_init__`, with a one-line error naming the field and the value received.

The module imports the standard library only, so the command line checks its
flags with it before Keras loads. The searches read it in
`keras_selfattn.decoding.by_settings.search_with` (the one place that chooses
greedy or beam).
"""

import dataclasses
import math
import numbers

from keras_selfattn.choices import (
    DEFAULT_BEAM_SIZE,
    DEFAULT_LENGTH_PENALTY,
    QUANTIZATIONS,
    SEARCH_PRECISIONS,
    SEARCHES,
)

__all__ = [
    "SearchSettings",
    "check_max_length_ratio",
    "check_precision",
    "check_quantize",
]


def _positive_integer(value):
    return (
        isinstance(value, numbers.Integral)
        and not isinstance(value, bool)
        and (value >= 1)
    )


def check_precision(precision):
    """``precision``, one of `SEARCH_PRECISIONS`; else a one-line ValueError."""
    if not isinstance(precision, str) or precision not in SEARCH_PRECISIONS:
        raise ValueError(
            f"precision must be one of {SEARCH_PRECISIONS}. Received: "
            f"precision={precision!r}"
        )
    return precision


def check_quantize(quantize):
    """``quantize``, None or one of `QUANTIZATIONS`; else a one-line ValueError."""
    if quantize is not None and (
        not isinstance(quantize, str) or quantize not in QUANTIZATIONS
    ):
        raise ValueError(
            f"quantize must be None or one of {QUANTIZATIONS}. Received: "
            f"quantize={quantize!r}"
        )
    return quantize


def check_max_length_ratio(max_length_ratio):
    """None, or ``max_length_ratio`` as a finite Python float > 0 (it keys the
    cached graphs); else a one-line ValueError naming it."""
    value = max_length_ratio
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Real)
        or not (math.isfinite(value) and value > 0)
    ):
        raise ValueError(
            "max_length_ratio must be None or a finite number > 0. "
            f"Received: max_length_ratio={value!r}"
        )
    return float(value)


@dataclasses.dataclass(frozen=True)
class SearchSettings:
    """The settings of a translator's searches, checked when made.

    Attributes:
        search: ``"greedy"`` (the most likely token each step) or ``"beam"``.
        beam_size: the beam's width (an int >= 1): the hypotheses a beam search
            keeps, and those an export's ``translate_nbest`` returns (which
            searches by beam whatever ``search`` says; ``serving_default``
            searches greedily).
        length_penalty: the beam's length-normalization strength (GNMT's
            alpha, a finite float >= 0).
        max_length_ratio: None (off), or a finite float R > 0: each sentence
            is searched for at most ``ceil(R x its source tokens) + 10`` steps
            (`keras_selfattn.decoding.decode`).
        shortlist: None (the whole vocabulary), or N >= 1: each batch is
            searched over its sources' candidate target pieces plus the N most
            frequent, the table the run keeps (``RUN_DIR/shortlist.npz``,
            written by training or ``keras-selfattn shortlist``).
        precision: the searches' products, ``"float32"`` or ``"bfloat16"``.
        quantize: None, or ``"int8"``: the products' kernels held as int8
            with per-channel scales, dequantized once per search.

    Example:

        settings = SearchSettings(search="beam", beam_size=4)
        settings.with_beam(1).search  # "greedy"
    """

    search: str = "greedy"
    beam_size: int = DEFAULT_BEAM_SIZE
    length_penalty: float = DEFAULT_LENGTH_PENALTY
    max_length_ratio: float | None = None
    shortlist: int | None = None
    precision: str = "float32"
    quantize: str | None = None

    def __post_init__(self) -> None:
        if self.search not in SEARCHES:
            raise ValueError(
                f"search must be one of {SEARCHES}. Received: search={self.search!r}"
            )
        if not _positive_integer(self.beam_size):
            raise ValueError(
                f"beam_size must be at least 1. Received: beam_size={self.beam_size!r}"
            )
        penalty = self.length_penalty
        if isinstance(penalty, bool) or not (
            isinstance(penalty, numbers.Real)
            and math.isfinite(penalty)
            and penalty >= 0
        ):
            raise ValueError(
                "length_penalty must be a finite number >= 0. "
                f"Received: length_penalty={penalty!r}"
            )
        if self.shortlist is not None and not _positive_integer(self.shortlist):
            raise ValueError(
                "shortlist must be None or a positive integer (the most frequent "
                f"target pieces kept). Received: shortlist={self.shortlist!r}"
            )
        check_precision(self.precision)
        check_quantize(self.quantize)
        ratio = check_max_length_ratio(self.max_length_ratio)
        # Plain Python numbers: they key the cached search graphs.
        object.__setattr__(self, "max_length_ratio", ratio)
        object.__setattr__(self, "beam_size", int(self.beam_size))
        object.__setattr__(self, "length_penalty", float(penalty))

    @classmethod
    def for_beam(cls, beam_size: int = 1, **fields: object) -> "SearchSettings":
        """The settings of a ``--beam K`` choice: greedy for 1, else a beam of
        ``beam_size`` (`with_beam`); ``fields``: the other fields."""
        return cls(**fields).with_beam(beam_size)  # type: ignore[arg-type]

    @classmethod
    def given(
        cls, caller: str, settings: "SearchSettings | None", fields: dict
    ) -> "SearchSettings":
        """``settings``, or those of ``fields`` (the keyword arguments of a call
        such as ``load_translator(run, beam_size=4)``); both at once is a
        TypeError naming ``caller``."""
        if settings is None:
            return cls(**fields)
        if fields:
            raise TypeError(
                f"{caller} takes settings or their fields as keywords, not both. "
                f"Received: {sorted(fields)}"
            )
        return settings

    def with_beam(self, beam_size: int) -> "SearchSettings":
        """These settings searching greedily (``beam_size`` 1) or by a beam of
        ``beam_size``."""
        search = "greedy" if beam_size == 1 else "beam"
        return dataclasses.replace(self, search=search, beam_size=beam_size)

    def replace(self, **fields: object) -> "SearchSettings":
        """A copy with ``fields`` changed, checked again."""
        return dataclasses.replace(self, **fields)  # type: ignore[arg-type]

    @property
    def own_output(self) -> bool:
        """Whether the searches compute their own output layer (a shortlist, a
        lower precision or int8 weights): TensorFlow only."""
        return (
            self.precision != "float32"
            or self.shortlist is not None
            or self.quantize is not None
        )

    def as_dict(self) -> dict:
        """The fields as a JSON-able dict (an export's report records them)."""
        return dataclasses.asdict(self)
