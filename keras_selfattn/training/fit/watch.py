"""Watching a training: what every validation translates, scores and checks.

At every validation `ValidationWatch` translates a bounded sample of the
validation pairs greedily (the text a user would get), scores it with sacrebleu
against the references as written (chrF, BLEU), keeps three examples beside
their references, and runs the health check:

- **source dependence**: the mean total-variation distance between the model's
  next-token distributions for each pair's own source and for another pair's
  source, teacher-forced on the same target (0: the output ignores the source;
  a model that translates is far above `SOURCE_DEPENDENCE_FLOOR`). A collapsed
  encoder -- the same vector at every position for every source -- gives ~1e-6.
- **distinct translations**: distinct translations per distinct reference in the
  sample. A model that writes (nearly) one sentence for every input is below
  `DISTINCT_FLOOR`.

A failing check is an alarm in the log at the validation where it happens, and
`train` fails (`TrainResult.summary["health"]`, a non-zero exit of the command)
when it still fails at the last validation.
"""

import dataclasses

import numpy as np
from keras import ops

from keras_selfattn.reserved_ids import PAD_ID, START_ID
from keras_selfattn.scoring import evaluate

__all__ = [
    "DISTINCT_FLOOR",
    "SOURCE_DEPENDENCE_FLOOR",
    "Health",
    "ValidationWatch",
    "source_dependence",
]

SOURCE_DEPENDENCE_FLOOR = 0.01
DISTINCT_FLOOR = 0.1
_DEPENDENCE_PAIRS = 64  # teacher-forced pairs of the source-dependence check


@dataclasses.dataclass(frozen=True)
class Health:
    """The health check of one validation.

    Attributes:
        source_dependence: see the module docstring; None when the sample has
            fewer than two different sources.
        distinct: distinct translations / distinct references in the sample.
    """

    source_dependence: float | None
    distinct: float

    @property
    def problems(self) -> list[str]:
        """What is wrong, one sentence each (empty when healthy)."""
        problems = []
        if (
            self.source_dependence is not None
            and self.source_dependence < SOURCE_DEPENDENCE_FLOOR
        ):
            problems.append(
                "its predictions no longer depend on the source (source dependence "
                f"{self.source_dependence:.2g} < {SOURCE_DEPENDENCE_FLOOR})"
            )
        if self.distinct < DISTINCT_FLOOR:
            problems.append(
                "it writes (nearly) the same sentence for every input (distinct "
                f"translations per distinct reference {self.distinct:.2f} < "
                f"{DISTINCT_FLOOR})"
            )
        return problems

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict:
        return {
            "ok": self.ok,
            "source_dependence": self.source_dependence,
            "distinct": self.distinct,
            "problems": self.problems,
        }


def source_dependence(model, source_ids, target_in):
    """How much the next-token distributions change when the source changes.

    Each row's target is decoded (teacher forcing) once with its own source and
    once with the next row's source (rows rolled by one); the result is the mean,
    over the real target positions of the rows whose two sources differ, of the
    total-variation distance between the two distributions (0 to 1).

    Args:
        model: a `Seq2Seq`.
        source_ids: int (B, T) source ids, 0-padded.
        target_in: int (B, S) decoder inputs (start id first), 0-padded.

    Returns:
        float, or None when no two rows have different sources.
    """
    source_ids = np.asarray(source_ids)
    target_in = np.asarray(target_in)
    other = np.roll(source_ids, 1, axis=0)
    differs = np.any(source_ids != other, axis=1)
    if not differs.any():
        return None
    own = ops.softmax(model({"source": source_ids, "target_in": target_in}), axis=-1)
    swapped = ops.softmax(model({"source": other, "target_in": target_in}), axis=-1)
    distance = 0.5 * ops.convert_to_numpy(ops.sum(ops.abs(own - swapped), axis=-1))
    mask = (target_in != PAD_ID) & differs[:, None]
    return float(distance[mask].mean())


class ValidationWatch:
    """Translates, scores and checks a bounded validation sample (see the module).

    Args:
        pairs: the validation pairs; the first ``sample_size`` are used.
        tokenizer: the run's `text.PairTokenizer`.
        model_config: the run's `ModelConfig` (the length limits).
        sample_size: how many pairs to translate at each validation.
        examples: how many examples to log beside their references.
    """

    def __init__(self, pairs, tokenizer, model_config, sample_size=500, examples=3):
        self.pairs = list(pairs)[:sample_size]
        self.tokenizer = tokenizer
        self.model_config = model_config
        self.examples = examples
        self._dependence_batch = None

    def log_keys(self):
        """The numbers `__call__` adds to Keras' logs (history.csv columns)."""
        return ["val_chrf", "val_bleu", "val_distinct", "val_source_dependence"]

    def example_keys(self):
        """The history.csv columns of the examples."""
        return [f"val_example_{i + 1}" for i in range(self.examples)]

    def _translator(self, model):
        from keras_selfattn.translation import Translator  # imports TensorFlow

        return Translator(
            model,
            self.tokenizer,
            self.model_config.max_source_len,
            self.model_config.max_target_len,
        )

    def _batch(self, translator):
        """Source ids and teacher-forcing inputs of the source-dependence check."""
        if self._dependence_batch is None:
            import tensorflow as tf

            pairs = self.pairs[:_DEPENDENCE_PAIRS]
            source_ids, _, _ = translator.encode_sources([s for s, _ in pairs])
            targets = self.tokenizer.target.encode(tf.constant([t for _, t in pairs]))
            targets = targets[:, : self.model_config.max_target_len].to_list()
            width = max(1, max(len(t) for t in targets)) + 1
            target_in = np.full((len(pairs), width), PAD_ID, "int32")
            for row, ids in enumerate(targets):
                target_in[row, : len(ids) + 1] = [START_ID, *ids]
            self._dependence_batch = (np.asarray(source_ids), target_in)
        return self._dependence_batch

    def __call__(self, model):
        """Scores ``model`` on the sample.

        Returns:
            ``(logs, examples, health)``: the scores (`log_keys`), the examples
            (`example_keys`: "source => translation (reference: ...)") and a
            `Health`.
        """
        translator = self._translator(model)
        metrics = evaluate(translator, self.pairs)
        references = len({reference for _, reference in self.pairs})
        health = Health(
            source_dependence=source_dependence(model, *self._batch(translator)),
            distinct=metrics["distinct_translations"] / max(1, references),
        )
        logs = {
            "val_chrf": metrics["chrf"],
            "val_bleu": metrics["bleu"],
            "val_distinct": health.distinct,
            "val_source_dependence": (
                float("nan")
                if health.source_dependence is None
                else health.source_dependence
            ),
        }
        examples = dict.fromkeys(self.example_keys(), "")
        for key, example in zip(examples, metrics["examples"]):
            examples[key] = (
                f"{example['source']} => {example['translation']} "
                f"(reference: {example['reference']})"
            )
        return logs, examples, health
