"""`PairTokenizer`: the source and target tokenizers of a run, saved together.

A run directory holds three files written by `PairTokenizer.save` (their
names are `keras_selfattn.file_names`'):

- ``source_vocab.txt``, ``target_vocab.txt``: one token a line, in id order;
- ``source.spm.model``, ``target.spm.model``: a "sentencepiece" side's
  SentencePiece model (the bytes the tokenizer holds; its pieces are the
  vocabulary file's tokens), recorded as ``"sentencepiece_model_file"``;
- ``tokenizer.json``: each side's `TokenizerConfig` (kind, ops, normalization...)
  and vocabulary size, e.g.
  ``{"format": "keras_selfattn.text.PairTokenizer", "version": 2,
  "source": {"kind": "word", ..., "vocab_file": "source_vocab.txt",
  "vocab_size": 200}, "target": {...}}``.

The target side gives text back as written (`TokenizerConfig.check_reversible`):
it keeps its case and its Unicode form, and its tokens carry joiner marks, so the
model's detokenized output is compared with the references as written.

Version 2 (joiner marks in "word"/"subword" tokens, a cased target) replaced
version 1, whose tokens had no marks: a version-1 run directory cannot be read
(its vocabularies do not match the tokens version 2 makes); retrain it.
"""

import json
import os
import pathlib
from collections.abc import Sequence

import tensorflow as tf

from keras_selfattn.file_names import (
    SENTENCEPIECE_MODEL_FILES,
    SOURCE_VOCAB_FILE,
    TARGET_VOCAB_FILE,
    TOKENIZER_CONFIG_FILE,
)
from keras_selfattn.text.sentencepiece_model import canonical_sentencepiece_model
from keras_selfattn.text.tokenizers import Tokenizer, TokenizerConfig, build_tokenizer
from keras_selfattn.text.vocab import Vocabulary

__all__ = [
    "SENTENCEPIECE_MODEL_FILES",
    "SOURCE_VOCAB_FILE",
    "TARGET_VOCAB_FILE",
    "TOKENIZER_CONFIG_FILE",
    "PairTokenizer",
]

_FORMAT = "keras_selfattn.text.PairTokenizer"
_VERSION = 2


class PairTokenizer(tf.Module):
    """Source and target `Tokenizer`s of a translation model, saved as one unit.

    A `tf.Module`: its lookup tables are trackable resources, so
    `keras.export.ExportArchive.track(pair_tokenizer)` (or holding it on a
    `tf.Module` given to `tf.saved_model.save`) carries them into a SavedModel.

    Args:
        source: the source-side `Tokenizer`.
        target: the target-side `Tokenizer`.
        name: optional `tf.Module` name.

    Example:

    >>> pairs = [("Le chat.", "The cat."), ("Le chien.", "The dog.")]
    >>> tokenizer = PairTokenizer.build(pairs)
    >>> tokenizer.source.tokenize(tf.constant(["Le chat."])).to_list()[0][-1].decode()
    '\uffed.'
    >>> tokenizer.target.decode(tokenizer.target.encode(tf.constant(["The cat."])))
    <tf.Tensor: shape=(1,), dtype=string, numpy=array([b'The cat.'], dtype=object)>
    """

    def __init__(self, source: Tokenizer, target: Tokenizer, name: str | None = None):
        super().__init__(name=name)
        for side, tokenizer in (("source", source), ("target", target)):
            if not isinstance(tokenizer, Tokenizer):
                raise TypeError(
                    f"{side} must be a Tokenizer. Received: {type(tokenizer).__name__}"
                )
        target.config.check_reversible("target")
        self.source = source
        self.target = target

    @property
    def source_vocab_size(self) -> int:
        """Source vocabulary size (the encoder embedding's input dimension)."""
        return self.source.vocab_size

    @property
    def target_vocab_size(self) -> int:
        """Target vocabulary size (decoder embedding rows and output logits)."""
        return self.target.vocab_size

    @classmethod
    def build(
        cls,
        pairs: Sequence[tuple[str, str]],
        source_config: TokenizerConfig | None = None,
        target_config: TokenizerConfig | None = None,
    ) -> "PairTokenizer":
        """Learns both vocabularies from training pairs.

        Args:
            pairs: training ``(source, target)`` pairs (never the test split).
            source_config: source `TokenizerConfig` (default: words).
            target_config: target `TokenizerConfig`; it must give text back as
                written (`TokenizerConfig.check_reversible`). Default:
                `TokenizerConfig.for_target` with `source_config`'s kind, ops,
                digit splitting and vocabulary limits.

        Returns:
            A `PairTokenizer`.

        Example:

        >>> tokenizer = PairTokenizer.build(
        ...     [("5 mars 2024", "2024-03-05")],
        ...     TokenizerConfig(kind="word", split_digits=True),
        ...     TokenizerConfig.for_target(kind="char"),
        ... )
        >>> tokenizer.target_vocab_size  # 4 reserved + 2 0 4 - 3 5
        10
        """
        pairs = list(pairs)
        if not pairs:
            raise ValueError("PairTokenizer.build needs at least one pair")
        source_config = source_config or TokenizerConfig()
        if target_config is None:
            target_config = TokenizerConfig.for_target(
                kind=source_config.kind,
                ops=source_config.ops,
                split_digits=source_config.split_digits,
                max_vocab_size=source_config.max_vocab_size,
                min_count=source_config.min_count,
            )
        target_config.check_reversible("target")
        sources = [source for source, _ in pairs]
        targets = [target for _, target in pairs]
        return cls(
            build_tokenizer(sources, source_config, name="source"),
            build_tokenizer(targets, target_config, name="target"),
        )

    def config(self) -> dict:
        """The JSON-ready description written to ``tokenizer.json``."""
        config = {"format": _FORMAT, "version": _VERSION}
        for side, vocab_file in (
            ("source", SOURCE_VOCAB_FILE),
            ("target", TARGET_VOCAB_FILE),
        ):
            tokenizer = getattr(self, side)
            config[side] = {
                **tokenizer.config.to_dict(),
                "vocab_file": vocab_file,
                "vocab_size": tokenizer.vocab_size,
            }
            if tokenizer.sentencepiece_model is not None:
                config[side]["sentencepiece_model_file"] = SENTENCEPIECE_MODEL_FILES[
                    side
                ]
        return config

    def save(self, directory: str | os.PathLike) -> pathlib.Path:
        """Writes the vocabularies and ``tokenizer.json`` into `directory`.

        Args:
            directory: the run directory (created if missing; files replaced).

        Returns:
            The directory as a `pathlib.Path`.
        """
        directory = pathlib.Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self.source.vocabulary.save(directory / SOURCE_VOCAB_FILE)
        self.target.vocabulary.save(directory / TARGET_VOCAB_FILE)
        for side, model_file in SENTENCEPIECE_MODEL_FILES.items():
            model = getattr(self, side).sentencepiece_model
            if model is not None:
                (directory / model_file).write_bytes(model)
        (directory / TOKENIZER_CONFIG_FILE).write_text(
            json.dumps(self.config(), indent=2, ensure_ascii=False) + "\n",
            encoding="utf-8",
        )
        return directory

    @classmethod
    def load(cls, directory: str | os.PathLike) -> "PairTokenizer":
        """Reads a `PairTokenizer` written by `save`.

        Args:
            directory: the run directory.

        Returns:
            A `PairTokenizer` giving the same ids as the one saved.

        Raises:
            FileNotFoundError: ``tokenizer.json``, a vocabulary file or a
                SentencePiece model file is missing.
            ValueError: the JSON is not a PairTokenizer description, a
                vocabulary's size differs from the one recorded, or a SentencePiece
                model is not one, or does not match its vocabulary.
        """
        directory = pathlib.Path(directory)
        config_path = directory / TOKENIZER_CONFIG_FILE
        config = _read_config(config_path, directory)
        return cls(
            *(
                _load_side(directory, config_path, side, dict(config[side]))
                for side in ("source", "target")
            )
        )


def _read_config(config_path, directory):
    """The checked ``tokenizer.json`` of a run directory, as a dict."""
    if not config_path.is_file():
        raise FileNotFoundError(
            f"No {TOKENIZER_CONFIG_FILE} in {directory}: not a run directory "
            "written by PairTokenizer.save"
        )
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise ValueError(f"{config_path}: not valid JSON ({error})") from None
    if not isinstance(config, dict) or config.get("format") != _FORMAT:
        raise ValueError(f"{config_path}: not a {_FORMAT} description")
    if config.get("version") == 1:
        raise ValueError(
            f"{config_path}: format version 1, written by an older keras_selfattn "
            "whose tokenizers lowercased the target and dropped its spacing "
            f"(version {_VERSION} keeps both): its vocabularies and model do not "
            "fit this version's tokens. Retrain the run (or use the "
            "keras_selfattn release that wrote it)"
        )
    if config.get("version") != _VERSION:
        raise ValueError(
            f"{config_path}: format version {config.get('version')!r} is not "
            f"supported (this keras_selfattn reads version {_VERSION})"
        )
    return config


def _load_side(directory, config_path, side, side_config):
    """The `Tokenizer` of one side, from its entry in ``tokenizer.json``."""
    vocab_file = side_config.pop("vocab_file")
    vocab_size = side_config.pop("vocab_size")
    model_file = side_config.pop("sentencepiece_model_file", None)
    vocabulary = Vocabulary.load(directory / vocab_file)
    if vocabulary.size != vocab_size:
        raise ValueError(
            f"{directory / vocab_file}: {vocabulary.size} tokens, but "
            f"{config_path} records vocab_size={vocab_size}"
        )
    tokenizer_config = TokenizerConfig.from_dict(side_config)
    if tokenizer_config.kind != "sentencepiece":
        return Tokenizer(tokenizer_config, vocabulary, name=side)
    model_path = directory / (model_file or SENTENCEPIECE_MODEL_FILES[side])
    if not model_path.is_file():
        raise FileNotFoundError(
            f"SentencePiece model file not found: {model_path} (the "
            f"{side} tokenizer of {config_path} needs it)"
        )
    model = canonical_sentencepiece_model(model_path.read_bytes(), str(model_path))
    try:
        return Tokenizer(
            tokenizer_config, vocabulary, name=side, sentencepiece_model=model
        )
    except ValueError as error:
        raise ValueError(f"{model_path}: {error}") from None
