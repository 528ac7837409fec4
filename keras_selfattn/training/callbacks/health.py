"""The health check of every validation, and its alarm.

`validation.ValidationWatch` measures a bounded sample of greedy translations of
the validation pairs; `Health` says whether the model translates:

- **source dependence**: the mean total-variation distance between the model's
  next-token distributions for each pair's own source and for another pair's
  source, teacher-forced on the same target (0: the output ignores the source;
  a model that translates is far above `SOURCE_DEPENDENCE_FLOOR`). A collapsed
  encoder -- the same vector at every position for every source -- gives ~1e-6.
- **distinct translations**: distinct translations per distinct reference in the
  sample. A model that writes (nearly) one sentence for every input is below
  `DISTINCT_FLOOR`.
- **a few strings**: the share of the sample's translations that are one of
  their `TOP_STRINGS` most frequent (`top_share`). A model that writes one of a
  few sentences for most inputs reaches `TOP_SHARE_CEILING` (half the sample)
  whatever the corpus; it fails when that share is also more than
  `TOP_SHARE_MARGIN` times the references' own top-3 share, so that a corpus
  whose references repeat (a few answers to many questions) is not failed for
  translating them.

A failing check is an alarm in the log at the validation where it happens
(`HealthAlarm`), and `train` fails (`TrainResult.summary["health"]`, a
non-zero exit of the command) when it still fails at the last validation.
"""

import collections
import dataclasses
import sys

import keras
import numpy as np
from keras import ops

from keras_selfattn.reserved_ids import PAD_ID

__all__ = [
    "DISTINCT_FLOOR",
    "SOURCE_DEPENDENCE_FLOOR",
    "TOP_SHARE_CEILING",
    "TOP_SHARE_MARGIN",
    "TOP_STRINGS",
    "Health",
    "HealthAlarm",
    "source_dependence",
    "top_share",
]

SOURCE_DEPENDENCE_FLOOR = 0.01
DISTINCT_FLOOR = 0.1
TOP_STRINGS = 3  # the most frequent translations the "a few strings" check counts
TOP_SHARE_CEILING = 0.5  # their share of the sample at which it fails...
TOP_SHARE_MARGIN = 2.0  # ...when also over this times the references' own share


@dataclasses.dataclass(frozen=True)
class Health:
    """The health check of one validation.

    Attributes:
        source_dependence: see the module docstring; None when the sample has
            fewer than two different sources.
        distinct: distinct translations / distinct references in the sample.
        top_share: the share of the sample's translations that are one of their
            `TOP_STRINGS` most frequent (`top_share`); None: not measured.
        reference_top_share: the same share of the sample's references.
    """

    source_dependence: float | None
    distinct: float
    top_share: float | None = None
    reference_top_share: float | None = None

    @property
    def few_strings(self) -> bool:
        """Whether most translations are one of a few strings (module docstring)."""
        if self.top_share is None:
            return False
        return self.top_share >= TOP_SHARE_CEILING and self.top_share > (
            TOP_SHARE_MARGIN * (self.reference_top_share or 0.0)
        )

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
        if self.few_strings:
            problems.append(
                f"it writes one of a few sentences for most inputs (its {TOP_STRINGS} "
                f"most frequent translations are {self.top_share:.0%} of them, >= "
                f"{TOP_SHARE_CEILING:.0%} and over {TOP_SHARE_MARGIN:g} times the "
                f"references' {self.reference_top_share or 0.0:.0%})"
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
            "top_share": self.top_share,
            "reference_top_share": self.reference_top_share,
            "problems": self.problems,
        }


def top_share(texts, top=TOP_STRINGS):
    """The share of ``texts`` that are one of their ``top`` most frequent strings
    (0.0 for no texts).

    Example:

    >>> top_share(["a", "a", "b", "c", "d", "e"], top=2)
    0.5
    """
    texts = list(texts)
    if not texts:
        return 0.0
    counts = collections.Counter(texts).most_common(top)
    return sum(count for _, count in counts) / len(texts)


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


class HealthAlarm(keras.callbacks.Callback):
    """A warning line on stderr at each validation whose health check fails.

    Args:
        plan: the run's `StepPlan` (which periods end in a validation).
        validation: the run's `validation.Validation` (its ``health``).
    """

    def __init__(self, plan, validation):
        super().__init__()
        self.plan = plan
        self.validation = validation

    def on_epoch_end(self, epoch, logs=None):
        if not self.plan.evaluates(epoch + 1):
            return
        health = self.validation.health
        if health is not None and not health.ok:
            print(
                f"keras-selfattn: warning: step {self.plan.step_after(epoch + 1)}: "
                "the model is not translating: " + "; ".join(health.problems),
                file=sys.stderr,
                flush=True,
            )
