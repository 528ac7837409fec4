"""Sequence-level knowledge distillation's data (Kim and Rush 2016): a teacher
run's translations of a pair file's sources, as a new pair file to train a
student on.

- `translate_pairs`: ``source<TAB>teacher's translation`` for each input pair,
  streamed a batch at a time, resumable after any stop (the output and its
  progress record, `record`), and shardable across processes or machines
  (``shard=(index, count)``: the pairs whose index modulo count is index);
- `merge_shards`: the shards' files back in input order, checked complete and
  alike first.

docs/distillation.md gives the contract of the files written.
"""

from keras_selfattn.distillation.merge import merge_shards
from keras_selfattn.distillation.translate import (
    DEFAULT_BATCH_SIZE,
    DistilledPairs,
    parse_shard,
    translate_pairs,
)

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "DistilledPairs",
    "merge_shards",
    "parse_shard",
    "translate_pairs",
]
