"""`TokenizerConfig`: how text becomes tokens (kind, ops, normalization, limits).

No TensorFlow here: a configuration is checked, saved and read without loading
it. The kinds and ops come from `keras_selfattn.choices` (their one home, which
the training configuration and the command line offer too).
"""

import dataclasses
from typing import Any

from keras_selfattn.choices import TOKENIZER_KINDS, TOKENIZER_OPS
from keras_selfattn.reserved_ids import RESERVED_TOKENS

__all__ = ["KINDS", "OPS", "TokenizerConfig"]

# The names this module has always had for them.
KINDS = TOKENIZER_KINDS
OPS = TOKENIZER_OPS
_NORMALIZATION_FORMS = ("NFKC", "NFC", "NFKD", "NFD")


def _normalization_form(normalization, ops):
    """``normalization`` as a `TokenizerConfig` stores it ("NFKC", ... or "none")."""
    form = normalization
    if form is None:
        form = "NFKC" if ops == "tensorflow_text" else "none"
    if isinstance(form, str) and form.lower() == "none":
        form = "none"
    elif isinstance(form, str):
        form = form.upper()
    if form not in _NORMALIZATION_FORMS + ("none",):
        raise ValueError(
            f"normalization must be one of {_NORMALIZATION_FORMS + ('none',)} or "
            f"None. Received: normalization={normalization!r}"
        )
    return form


def _check_core_ops(kind, normalization):
    """Raises ValueError for what ``ops="core"`` cannot do."""
    if normalization != "none":
        raise ValueError(
            "Unicode normalization needs tensorflow_text ops; core TensorFlow has "
            "none. Use ops='tensorflow_text', or normalization='none' with "
            f"ops='core'. Received: ops='core', normalization={normalization!r}"
        )
    if kind == "subword":
        raise ValueError(
            "kind='subword' needs tensorflow_text's FastWordpieceTokenizer. Use "
            "ops='tensorflow_text', or kind='word' or 'char' with ops='core'. "
            "Received: kind='subword', ops='core'"
        )
    if kind == "sentencepiece":
        raise ValueError(
            "kind='sentencepiece' needs tensorflow_text's SentencepieceTokenizer. "
            "Use ops='tensorflow_text', or kind='word' or 'char' with ops='core'. "
            "Received: kind='sentencepiece', ops='core'"
        )


@dataclasses.dataclass(frozen=True)
class TokenizerConfig:
    """How text becomes tokens: kind, ops, normalization, vocabulary limits.

    Saved as JSON beside the vocabulary (`to_dict` / `from_dict`).

    Args:
        kind: "word", "char", "subword" or "sentencepiece" (see the module
            docstring).
        ops: "tensorflow_text" or "core" (core TensorFlow ops only: no Unicode
            normalization, `tf.strings.lower` instead of case folding; no subwords,
            no SentencePiece).
        lowercase: case-fold ("tensorflow_text") or lowercase ("core") the text.
        normalization: Unicode normalization form, "NFKC", "NFC", "NFKD", "NFD" or
            "none". `None` picks the default: "NFKC" for "tensorflow_text", "none"
            for "core".
        split_digits: "word"/"subword": make every decimal digit its own token;
            "sentencepiece": a learned model makes every digit its own piece.
        max_vocab_size: vocabulary size limit, reserved tokens included. `None`:
            no limit for "word"/"char"; 8000 (the learner's target) for "subword"
            and "sentencepiece" (a soft limit there: a small corpus gets fewer).
        min_count: "word"/"char": tokens seen fewer times in the training data
            are left out of the vocabulary; "subword": least count of a piece;
            "sentencepiece": unused.
        sentencepiece_model: "sentencepiece": the path of the user's own ``.model``
            file to use instead of learning one (see
            `keras_selfattn.text.sentencepiece_model.read_sentencepiece_model`);
            None: learn one. Recorded for provenance: a saved tokenizer keeps the
            model's bytes, not the path.

    Example:

    >>> TokenizerConfig(kind="char", ops="core").normalization
    'none'
    """

    kind: str = "word"
    ops: str = "tensorflow_text"
    lowercase: bool = True
    normalization: str | None = None
    split_digits: bool = False
    max_vocab_size: int | None = None
    min_count: int = 1
    sentencepiece_model: str | None = None

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(
                f"kind must be one of {KINDS}. Received: kind={self.kind!r}"
            )
        if self.ops not in OPS:
            raise ValueError(f"ops must be one of {OPS}. Received: ops={self.ops!r}")
        normalization = _normalization_form(self.normalization, self.ops)
        object.__setattr__(self, "normalization", normalization)
        if self.ops == "core":
            _check_core_ops(self.kind, normalization)
        if self.sentencepiece_model is not None and self.kind != "sentencepiece":
            raise ValueError(
                "sentencepiece_model (a SentencePiece .model file) needs "
                f"kind='sentencepiece'. Received: kind={self.kind!r}, "
                f"sentencepiece_model={self.sentencepiece_model!r}"
            )
        if self.max_vocab_size is not None and self.max_vocab_size < len(
            RESERVED_TOKENS
        ):
            raise ValueError(
                "max_vocab_size must be at least 4 (the reserved tokens) or None. "
                f"Received: max_vocab_size={self.max_vocab_size}"
            )
        if self.min_count < 1:
            raise ValueError(
                f"min_count must be >= 1. Received: min_count={self.min_count}"
            )

    @classmethod
    def for_target(cls, kind: str = "word", **kwargs) -> "TokenizerConfig":
        """A config for a target side: text comes back as written.

        The same arguments as the constructor, with other defaults:
        ``lowercase=False`` and ``normalization="none"``, so that
        ``normalize(text)`` is ``text`` (whitespace runs aside) and the model's
        detokenized output can equal the reference as written in the data.

        Example:

        >>> TokenizerConfig.for_target("char").lowercase
        False
        """
        kwargs.setdefault("lowercase", False)
        kwargs.setdefault("normalization", "none")
        return cls(kind=kind, **kwargs)

    def check_reversible(self, side: str = "target") -> None:
        """Raises ValueError unless detokenization gives the text back as written.

        Lowercasing and the compatibility forms (NFKC, NFKD: "²" -> "2", "ﬁ" ->
        "fi") cannot be undone, so a side whose output is read by people, or
        scored against its references, must not use them. NFC and NFD are
        allowed (canonically equivalent text; the bytes of text not already in
        that form differ).

        Args:
            side: the name used in the message (e.g. "target").
        """
        problems = []
        if self.lowercase:
            problems.append("lowercase=True")
        if self.normalization in ("NFKC", "NFKD"):
            problems.append(f"normalization={self.normalization!r}")
        if problems:
            raise ValueError(
                f"The {side} tokenizer must give text back as written (it is what "
                "users read and what the metrics compare with the references), "
                f"but {' and '.join(problems)} cannot be undone. Use "
                f"TokenizerConfig.for_target(kind={self.kind!r}, ...) (lowercase="
                "False, normalization='none'); lowercasing and NFKC are for the "
                f"source side. Received: {side}_config={self!r}"
            )

    def to_dict(self) -> dict[str, Any]:
        """The fields as a JSON-ready dict."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, config: dict[str, Any]) -> "TokenizerConfig":
        """Inverse of `to_dict`; unknown keys raise ValueError."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(config) - known)
        if unknown:
            raise ValueError(
                f"Unknown TokenizerConfig keys {unknown}. Known keys: {sorted(known)}"
            )
        return cls(**config)
