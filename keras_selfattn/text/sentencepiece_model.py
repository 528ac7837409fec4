"""SentencePiece models: learned from a stream of sentences, or read from a user's file.

The "sentencepiece" tokenizer kind (`keras_selfattn.text.tokenizers`) holds a
serialized SentencePiece ``ModelProto`` (the bytes of a ``.model`` file) whose
first four pieces are our reserved tokens, at our reserved ids
(`keras_selfattn.reserved_ids`): ``<pad>`` 0, ``<unk>`` 1, ``<s>`` 2, ``</s>`` 3.
Its pieces, in id order, are the tokenizer's `Vocabulary`, so the model's ids
are the vocabulary's ids with no shift in the graph.

- `train_sentencepiece_model` learns a unigram model with the ``sentencepiece``
  package from an iterator of (already normalized) sentences, in memory: no
  temporary file; at most ``input_sentence_size`` sentences are held (a
  reservoir sample of the stream).
- `read_sentencepiece_model` reads a user's ``.model`` file. A model trained
  with other special ids (SentencePiece's defaults: ``<unk>`` 0, ``<s>`` 1,
  ``</s>`` 2 and no padding piece) is REWRITTEN, not shifted in the graph: its
  unknown piece and its beginning/end/padding control pieces are removed, our
  four reserved pieces are put first, and every other piece keeps its order
  after them (so its ids move, and the segmentation does not change: a unigram
  or BPE model segments by piece scores, not ids). A model with an ordinary
  piece spelled like one of our reserved tokens is refused.
"""

import os
import pathlib
from collections.abc import Iterable

from keras_selfattn.reserved_ids import (
    END_ID,
    END_TOKEN,
    PAD_ID,
    PAD_TOKEN,
    RESERVED_TOKENS,
    START_ID,
    START_TOKEN,
    UNK_ID,
    UNK_TOKEN,
)

__all__ = [
    "DEFAULT_INPUT_SENTENCE_SIZE",
    "DEFAULT_SENTENCEPIECE_VOCAB_SIZE",
    "canonical_sentencepiece_model",
    "read_sentencepiece_model",
    "sentencepiece_pieces",
    "train_sentencepiece_model",
]

DEFAULT_SENTENCEPIECE_VOCAB_SIZE = 8000
# SentencePiece keeps at most this many sentences of the stream (a reservoir
# sample): memory stays bounded whatever the corpus. Measured on 1M synthetic
# pairs (benchmarks/RESULTS.md, "Vocabulary learning"): 1M sentences held peaked
# at 2.8 GiB and 186 CPU-s for one side, 300k at 1.5 GiB and 98 CPU-s; 300k
# sentences (3-4M words) are plenty for an 8,000-piece vocabulary.
DEFAULT_INPUT_SENTENCE_SIZE = 300_000

# sentencepiece_model.proto: ModelProto.SentencePiece.Type
_NORMAL, _UNKNOWN, _CONTROL = 1, 2, 3


def _model_proto():
    from sentencepiece import sentencepiece_model_pb2

    return sentencepiece_model_pb2.ModelProto()


def _check_loadable(model: bytes, where: str) -> None:
    """Raises ValueError (naming ``where``) unless SentencePiece loads ``model``."""
    import sentencepiece

    processor = sentencepiece.SentencePieceProcessor()
    try:
        processor.LoadFromSerializedProto(model)
    except (RuntimeError, OSError, TypeError) as error:
        detail = str(error).strip()
        if "ParseFromArray" in detail:  # sentencepiece's words for "not a proto"
            detail = "it does not parse as a serialized ModelProto"
        raise ValueError(f"{where}: not a SentencePiece model ({detail})") from None


# The trainer spec fields of our reserved pieces (ids 0-3).
_RESERVED_SPEC = {
    "pad_id": PAD_ID,
    "unk_id": UNK_ID,
    "bos_id": START_ID,
    "eos_id": END_ID,
    "pad_piece": PAD_TOKEN,
    "unk_piece": UNK_TOKEN,
    "bos_piece": START_TOKEN,
    "eos_piece": END_TOKEN,
}
# The fixed settings of `train_sentencepiece_model` (its docstring says why).
_TRAINER_SETTINGS = {
    "model_type": "unigram",
    "hard_vocab_limit": False,
    "character_coverage": 1.0,
    "normalization_rule_name": "identity",
    "shuffle_input_sentence": True,
    "minloglevel": 2,
    **_RESERVED_SPEC,
}


def train_sentencepiece_model(
    sentences: Iterable[str],
    vocab_size: int = DEFAULT_SENTENCEPIECE_VOCAB_SIZE,
    *,
    split_digits: bool = False,
    input_sentence_size: int = DEFAULT_INPUT_SENTENCE_SIZE,
    num_threads: int | None = None,
) -> bytes:
    """Learns a unigram SentencePiece model from sentences; returns its bytes.

    The sentences should already be normalized the way the tokenizer normalizes
    (`keras_selfattn.text.normalize_text`): the model applies no normalization
    of its own (``normalization_rule_name="identity"``), so its pieces spell the
    text as given. Settings: ``model_type="unigram"``, ``character_coverage=1.0``
    (every character seen is a piece), ``hard_vocab_limit=False`` (a small corpus
    gets fewer pieces instead of an error), ``pad/unk/bos/eos`` at our reserved
    ids 0-3.

    Args:
        sentences: an iterable of `str` (consumed once).
        vocab_size: the vocabulary size aimed at, reserved pieces included (a
            soft limit).
        split_digits: make every digit its own piece.
        input_sentence_size: SentencePiece keeps at most this many sentences (a
            uniform sample of the stream): memory is bounded by it.
        num_threads: training threads (default: the CPUs of this machine).

    Returns:
        The serialized ``ModelProto`` (what a ``.model`` file holds).

    Raises:
        ValueError: no sentence, or SentencePiece refuses the data.
    """
    import io

    import sentencepiece

    writer = io.BytesIO()
    try:
        sentencepiece.SentencePieceTrainer.train(
            sentence_iterator=(sentence for sentence in sentences if sentence),
            model_writer=writer,
            vocab_size=vocab_size,
            split_digits=split_digits,
            input_sentence_size=input_sentence_size,
            num_threads=num_threads or os.cpu_count() or 1,
            **_TRAINER_SETTINGS,
        )
    except RuntimeError as error:
        raise ValueError(
            f"SentencePiece could not learn a model: {str(error).strip()}"
        ) from None
    model = writer.getvalue()
    if not model:
        raise ValueError("SentencePiece could not learn a model: no sentences")
    return model


def sentencepiece_pieces(model: bytes) -> list[str]:
    """The pieces of a serialized model, in id order."""
    proto = _model_proto()
    proto.ParseFromString(model)
    return [piece.piece for piece in proto.pieces]


# Our reserved pieces, in id order, with their piece types.
_RESERVED_PIECES = (
    (PAD_TOKEN, _CONTROL),
    (UNK_TOKEN, _UNKNOWN),
    (START_TOKEN, _CONTROL),
    (END_TOKEN, _CONTROL),
)


def canonical_sentencepiece_model(model: bytes, where: str = "model") -> bytes:
    """``model`` with our reserved pieces at ids 0-3 (rewritten if needed).

    A model already in that form (one that `train_sentencepiece_model` wrote)
    comes back unchanged. Otherwise its unknown piece and the control pieces of
    its ``trainer_spec`` (``bos_id``, ``eos_id``, ``pad_id``, where >= 0) are
    dropped, ``<pad>``, ``<unk>``, ``<s>``, ``</s>`` go first, and the other
    pieces follow in their order (see the module docstring).

    Args:
        model: serialized ``ModelProto``.
        where: names the model in error messages (an option and a path).

    Returns:
        The serialized canonical ``ModelProto``.

    Raises:
        ValueError: not a SentencePiece model, or one with an ordinary piece
            spelled like a reserved token.
    """
    from google.protobuf.message import DecodeError

    _check_loadable(model, where)
    proto = _model_proto()
    try:
        proto.ParseFromString(model)
    except DecodeError as error:
        raise ValueError(f"{where}: not a SentencePiece model ({error})") from None
    pieces = list(proto.pieces)
    spec = proto.trainer_spec
    if _is_canonical(pieces, spec):
        return model
    kept = _ordinary_pieces(pieces, spec, where)
    del proto.pieces[:]
    for token, piece_type in _RESERVED_PIECES:
        proto.pieces.add(piece=token, score=0.0, type=piece_type)
    proto.pieces.extend(kept)
    for field, value in _RESERVED_SPEC.items():
        setattr(spec, field, value)
    rewritten = proto.SerializeToString()
    _check_loadable(rewritten, where)
    return rewritten


def _is_canonical(pieces, spec):
    """Whether the reserved pieces and the trainer spec's ids are ours already."""
    first = [(p.piece, p.type) for p in pieces[: len(_RESERVED_PIECES)]]
    ids = (spec.pad_id, spec.unk_id, spec.bos_id, spec.eos_id)
    return first == list(_RESERVED_PIECES) and ids == (
        PAD_ID,
        UNK_ID,
        START_ID,
        END_ID,
    )


def _ordinary_pieces(pieces, spec, where):
    """Copies of the pieces other than the unknown and the special control ones."""
    special = {
        index
        for index in (spec.pad_id, spec.bos_id, spec.eos_id)
        if 0 <= index < len(pieces) and pieces[index].type == _CONTROL
    }
    special |= {index for index, p in enumerate(pieces) if p.type == _UNKNOWN}
    kept = [p for index, p in enumerate(pieces) if index not in special]
    clashes = sorted({p.piece for p in kept} & set(RESERVED_TOKENS))
    if clashes:
        raise ValueError(
            f"{where}: the model has ordinary pieces {clashes} spelled like the "
            f"reserved tokens {list(RESERVED_TOKENS)} (ids 0-3), which this package "
            "needs; train it with pad_id=0, unk_id=1, bos_id=2, eos_id=3 and those "
            "piece names, or rename the pieces"
        )
    copies = []
    for piece in kept:
        copy = type(piece)()
        copy.CopyFrom(piece)
        copies.append(copy)
    return copies


def read_sentencepiece_model(path: str | os.PathLike, option: str = "model") -> bytes:
    """Reads a user's ``.model`` file, made canonical (`canonical_sentencepiece_model`).

    Args:
        path: the ``.model`` file (as written by ``sentencepiece``'s trainer).
        option: the option that named the file, for error messages (e.g.
            ``"--source-sentencepiece-model"``).

    Returns:
        The serialized canonical model.

    Raises:
        FileNotFoundError: no such file (the message names ``option`` and ``path``).
        ValueError: the file is not a SentencePiece model, or cannot be made
            canonical (the message names ``option`` and ``path``).
    """
    path = pathlib.Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{option} {path}: no such file")
    model = path.read_bytes()
    if not model:
        raise ValueError(f"{option} {path}: not a SentencePiece model (empty file)")
    return canonical_sentencepiece_model(model, f"{option} {path}")
