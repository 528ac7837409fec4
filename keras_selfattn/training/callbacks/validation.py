"""What every validation computes, written into the logs the next callbacks read.

`Validation` computes the validation loss and metrics and, with a
`ValidationWatch`, translates a bounded sample of the validation pairs greedily
(the text a user would get), scores it with sacrebleu against the references as
written (chrF, BLEU), keeps three examples beside their references and runs the
health check (`health.Health`). The figures go into Keras' logs (``val_*``,
``cpu_seconds``, ``wall_seconds``: ``history.csv``'s columns); the examples
(text, which Keras would average) and the `Health` stay on the callback.
"""

import os
import time

import keras
import numpy as np

from keras_selfattn.reserved_ids import PAD_ID, START_ID
from keras_selfattn.scoring import score_translations
from keras_selfattn.training.callbacks.health import (
    Health,
    source_dependence,
    top_share,
)

__all__ = ["RunClock", "Validation", "ValidationWatch"]

_DEPENDENCE_PAIRS = 64  # teacher-forced pairs of the source-dependence check


def clock_reading():
    """``(CPU seconds of this process, a monotonic wall clock)`` now."""
    times = os.times()
    return (times.user + times.system, time.monotonic())


class RunClock:
    """The CPU seconds (this process') and wall seconds a run has taken, across
    resumes: those since ``started`` plus what the run had counted before
    (``history.csv``'s last row, for a resumed or continued run).

    Args:
        before: ``(cpu_seconds, wall_seconds)`` counted before this call.
        started: the `clock_reading` it counts from (default: now).
    """

    def __init__(self, before=(0.0, 0.0), started=None):
        self.before = before
        self.started = started or clock_reading()

    def read(self):
        """``(cpu_seconds, wall_seconds)`` of the run so far."""
        now = clock_reading()
        return tuple(b + n - s for b, n, s in zip(self.before, now, self.started))


class Validation(keras.callbacks.Callback):
    """Validates on the plan's cadence and always at the last step.

    Writes into ``logs`` the validation loss and metrics (``val_*``), the CPU
    and wall seconds of the run so far (``cpu_seconds``, ``wall_seconds``, by
    ``clock``: a resumed run goes on counting) and the watch's scores; an epoch
    without validation gets those columns empty (NaN). The callbacks after it
    read them: the best model, early stopping, the log lines, the health alarm,
    TensorBoard, ``history.csv``.

    Args:
        plan: the run's `StepPlan`.
        validation: the validation dataset (known cardinality).
        watch: a `ValidationWatch`, or None (loss only).
        clock: a `RunClock` (default: counting from this callback's creation).

    Attributes:
        examples: the last validation's examples (``history.csv`` columns).
        health: the last validation's `health.Health`, or None.
    """

    def __init__(self, plan, validation, watch=None, clock=None):
        super().__init__()
        self.plan = plan
        self.validation = validation
        self.watch = watch
        self.clock = clock or RunClock()
        self.health = None
        self.examples = {}

    def on_epoch_end(self, epoch, logs=None):
        logs = logs if logs is not None else {}
        if not self.plan.evaluates(epoch + 1):
            self._no_validation(logs)
            return
        results = self.model.evaluate(self.validation, verbose=0, return_dict=True)
        for name, value in results.items():
            logs["val_" + name] = value
        logs["cpu_seconds"], logs["wall_seconds"] = self.clock.read()
        if self.watch is not None:
            scores, self.examples, self.health = self.watch(self.model)
            logs.update(scores)

    def _no_validation(self, logs):
        """An epoch without validation: its columns of ``history.csv`` empty."""
        logs["val_loss"] = logs["cpu_seconds"] = logs["wall_seconds"] = float("nan")
        for key in self.watch.log_keys() if self.watch else ():
            logs[key] = float("nan")
        self.examples = (
            dict.fromkeys(self.watch.example_keys(), "") if self.watch else {}
        )


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
        return [
            "val_chrf",
            "val_bleu",
            "val_distinct",
            "val_source_dependence",
            "val_top_share",
        ]

    def example_keys(self):
        """The history.csv columns of the examples."""
        return [f"val_example_{i + 1}" for i in range(self.examples)]

    def translator(self, model):
        """A `Translator` of ``model`` with the run's tokenizer and length limits."""
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
        translator = self.translator(model)
        sources = [source for source, _ in self.pairs]
        references = [reference for _, reference in self.pairs]
        translations = [t.text for t in translator.translate(sources)]
        health = self.health(
            translations, source_dependence(model, *self._batch(translator))
        )
        scores = score_translations(translations, references)
        logs = {
            "val_chrf": scores["chrf"],
            "val_bleu": scores["bleu"],
            "val_distinct": health.distinct,
            "val_source_dependence": (
                float("nan")
                if health.source_dependence is None
                else health.source_dependence
            ),
            "val_top_share": health.top_share,
        }
        examples = dict.fromkeys(self.example_keys(), "")
        for key, source, translation, reference in zip(
            examples, sources, translations, references
        ):
            examples[key] = f"{source} => {translation} (reference: {reference})"
        return logs, examples, health

    def health(self, translations, dependence):
        """The `Health` of the sample's ``translations`` (greedy, one a pair, in
        the sample's order), given their ``source_dependence``."""
        references = [reference for _, reference in self.pairs]
        return Health(
            source_dependence=dependence,
            distinct=len(set(translations)) / max(1, len(set(references))),
            top_share=top_share(translations),
            reference_top_share=top_share(references),
        )
