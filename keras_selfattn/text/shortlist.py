"""A vocabulary shortlist table: for each source piece the target pieces it goes with.

The table is learned in one pass over tokenized training pairs, in memory sized
by the two vocabularies (a dense ``source_vocab x target_vocab`` count matrix,
4 bytes an entry: 64 MiB for two 4,000-piece vocabularies), never by the corpus.

Association measure: the co-occurrence estimate of the lexical probability
``p(t|s) = c(s, t) / c(s)``, where ``c(s)`` counts the pairs whose source holds
piece ``s`` and ``c(s, t)`` those whose source holds ``s`` and whose target holds
``t`` (each piece counted once a pair). Marian's lexical shortlist keeps the
best target pieces of each source piece by a lexical ``p(t|s)`` in the same way
(there from word alignment). For each source piece the table keeps the ``k``
target pieces of highest ``p(t|s)`` that are not already among the ``n`` most
frequent target pieces (ties: the lower id first); the ``n`` most frequent target
pieces (by token count) are kept for every batch; the reserved ids (padding,
unknown, start, end) always. A batch's shortlist is the union of its source
pieces' rows, the frequent pieces and the reserved ids
(`keras_selfattn.models.shortlist_ops.shortlist_ids`).

The table is saved as ``RUN_DIR/shortlist.npz`` (`SHORTLIST_FILE`, written
atomically) with a JSON record of where it came from and its size: training
writes it from the training split as its data streams
(`keras_selfattn.training.data.run_shortlist`), ``keras-selfattn shortlist``
makes it for a run without one, and the searches only read it
(`keras_selfattn.inference.TrainedRun.shortlist`).
"""

import dataclasses
import json
import os
import pathlib

import numpy as np

from keras_selfattn.choices import DEFAULT_FREQUENT, DEFAULT_PER_SOURCE
from keras_selfattn.file_names import SHORTLIST_FILE
from keras_selfattn.reserved_ids import END_ID, PAD_ID, RESERVED_TOKENS

__all__ = [
    "DEFAULT_FREQUENT",
    "DEFAULT_PER_SOURCE",
    "SHORTLIST_FILE",
    "CooccurrenceCounts",
    "ShortlistTable",
    "check_shortlist_sizes",
]

ASSOCIATION = "p(t|s) = c(s,t) / c(s), sentence-level co-occurrence counts"
_RESERVED = np.arange(len(RESERVED_TOKENS), dtype=np.int32)


def check_shortlist_sizes(per_source, frequent):
    """``(per_source, frequent)`` as ints > 0; a one-line ValueError naming either."""
    for name, value in (("per_source", per_source), ("frequent", frequent)):
        integer = isinstance(value, (int, np.integer)) and not isinstance(value, bool)
        if not integer or value <= 0:
            raise ValueError(
                f"{name} must be a positive integer. Received: {name}={value!r}"
            )
    return int(per_source), int(frequent)


class CooccurrenceCounts:
    """Sentence-level co-occurrence counts of source and target pieces.

    ``pairs`` ``[s, t]``: pairs whose source holds ``s`` and target holds ``t``;
    ``source`` ``[s]``: pairs whose source holds ``s``; ``target`` ``[t]``: how
    often ``t`` occurs in the targets (tokens). Padding is never counted.
    """

    def __init__(self, source_vocab_size, target_vocab_size):
        for name, value in (
            ("source_vocab_size", source_vocab_size),
            ("target_vocab_size", target_vocab_size),
        ):
            if not isinstance(value, (int, np.integer)) or value <= len(_RESERVED):
                raise ValueError(
                    f"{name} must be an integer above {len(_RESERVED)} (the reserved "
                    f"ids). Received: {name}={value!r}"
                )
        self.pairs = np.zeros((source_vocab_size, target_vocab_size), np.uint32)
        self.source = np.zeros(source_vocab_size, np.int64)
        self.target = np.zeros(target_vocab_size, np.int64)
        self.sentences = 0

    def add(self, source_ids, target_ids):
        """Counts one pair of id sequences (any ints; padding ids are skipped)."""
        source_ids = np.asarray(source_ids, np.int64).reshape(-1)
        target_ids = np.asarray(target_ids, np.int64).reshape(-1)
        target_ids = target_ids[target_ids != PAD_ID]
        np.add.at(self.target, target_ids, 1)
        s = np.unique(source_ids[source_ids != PAD_ID])
        t = np.unique(target_ids)
        self.source[s] += 1
        if s.size and t.size:
            self.pairs[np.ix_(s, t)] += 1
        self.sentences += 1

    def table(self, per_source=DEFAULT_PER_SOURCE, frequent=DEFAULT_FREQUENT):
        """The `ShortlistTable` these counts give (see the module docstring)."""
        per_source, frequent = check_shortlist_sizes(per_source, frequent)
        target_count = self.target.copy()
        target_count[_RESERVED] = -1  # kept anyway: never take a frequent slot
        order = np.lexsort((np.arange(target_count.size), -target_count))
        frequent_ids = np.sort(order[: min(frequent, target_count.size)])
        frequent_ids = frequent_ids[target_count[frequent_ids] > 0].astype(np.int32)
        # Ranking a row by p(t|s) = c(s,t)/c(s) is ranking it by c(s,t).
        scores = self.pairs.astype(np.int64)
        scores[:, _RESERVED] = 0
        scores[:, frequent_ids] = 0
        scores[PAD_ID] = 0
        width = min(per_source, scores.shape[1])
        # stable sort of -count: ties keep the lower id first
        best = np.argsort(-scores, axis=1, kind="stable")[:, :width]
        kept = np.take_along_axis(scores, best, axis=1) > 0
        candidates = np.where(kept, best, END_ID).astype(np.int32)
        return ShortlistTable(
            candidates=candidates,
            frequent=frequent_ids,
            record={
                "association": ASSOCIATION,
                "per_source": per_source,
                "frequent": frequent,
                "pairs_counted": int(self.sentences),
                "source_vocab_size": int(scores.shape[0]),
                "target_vocab_size": int(scores.shape[1]),
            },
        )


@dataclasses.dataclass
class ShortlistTable:
    """A learned shortlist.

    Attributes:
        candidates: int32 (source_vocab_size, per_source): each source piece's
            most associated target pieces, ``END_ID`` where it has fewer.
        frequent: int32 (<= n,) the most frequent target pieces, sorted.
        record: where the table came from and its size (JSON-able).
    """

    candidates: np.ndarray
    frequent: np.ndarray
    record: dict

    @property
    def always(self):
        """int32 the ids every shortlist holds: the reserved ones and `frequent`."""
        return np.union1d(_RESERVED, self.frequent).astype(np.int32)

    def ids_for(self, source_ids):
        """NumPy reference of a batch's shortlist: sorted unique int32 ids."""
        rows = self.candidates[np.asarray(source_ids, np.int64).reshape(-1)]
        return np.union1d(rows.reshape(-1), self.always).astype(np.int32)

    def save(self, directory):
        """Writes ``directory/shortlist.npz`` atomically; returns its path."""
        path = pathlib.Path(directory) / SHORTLIST_FILE
        tmp = path.with_name("tmp-" + path.name)
        record = {**self.record, "entries": int(self.candidates.size)}
        with open(tmp, "wb") as handle:
            np.savez(
                handle,
                candidates=self.candidates,
                frequent=self.frequent,
                record=np.array(json.dumps(record, sort_keys=True)),
            )
        os.replace(tmp, path)
        self.record = {**record, "bytes": path.stat().st_size}
        return path

    @classmethod
    def load(cls, directory):
        """The table saved in ``directory`` (a run directory or the file itself)."""
        path = pathlib.Path(directory)
        if path.is_dir():
            path = path / SHORTLIST_FILE
        if not path.exists():
            raise FileNotFoundError(
                f"No shortlist table at {path}; learn one first. "
                f"Received: directory={str(directory)!r}"
            )
        try:
            with np.load(path, allow_pickle=False) as data:
                candidates = data["candidates"].astype(np.int32)
                frequent = data["frequent"].astype(np.int32)
                record = json.loads(str(data["record"]))
        except (OSError, ValueError, KeyError) as error:
            raise ValueError(f"{path} is not a shortlist table: {error}") from None
        record["bytes"] = path.stat().st_size
        return cls(candidates, frequent, record)
