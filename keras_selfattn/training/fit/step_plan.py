"""Training by steps in ``model.fit``: how many, and when to validate and back up.

``model.fit`` runs "epochs" of `StepPlan.period` steps, the greatest common
divisor of the validation and backup cadences;
`training.callbacks.stop_at_step.StopAtStep` ends the run at
`StepPlan.total_steps` (the last period may be shorter). The callbacks read the
plan to know which periods end in a validation and at which step.
"""

import dataclasses
import math

__all__ = ["StepPlan", "plan_steps"]


@dataclasses.dataclass(frozen=True)
class StepPlan:
    """How many steps, and when to validate and back up.

    Attributes:
        total_steps: optimizer steps in all.
        eval_every: steps between validations.
        save_every: steps between backups.
        period: steps per Keras epoch (``gcd(eval_every, save_every)``).
        steps_per_epoch: steps in a data epoch (None in step mode).
    """

    total_steps: int
    eval_every: int
    save_every: int
    period: int
    steps_per_epoch: int | None = None

    @property
    def periods(self) -> int:
        """Keras epochs of the whole run."""
        return math.ceil(self.total_steps / self.period)

    def step_after(self, periods_done: int) -> int:
        """The step count once ``periods_done`` periods are trained."""
        return min(periods_done * self.period, self.total_steps)

    def evaluates(self, periods_done: int) -> bool:
        step = self.step_after(periods_done)
        return step % self.eval_every == 0 or step == self.total_steps

    def backs_up(self, periods_done: int) -> bool:
        step = self.step_after(periods_done)
        return step % self.save_every == 0 or step == self.total_steps


def plan_steps(train_config, train_pairs: int | None) -> StepPlan:
    """The `StepPlan` of a `TrainConfig`.

    ``train_pairs`` counts an epoch (needed without ``train_steps``).
    """
    steps_per_epoch = None
    if train_config.train_steps:
        total = train_config.train_steps
        eval_every = train_config.eval_every or 1000
    else:
        if train_pairs is None:
            raise ValueError("epochs need the number of training pairs")
        steps_per_epoch = max(1, train_pairs // train_config.batch_size)
        total = train_config.epochs * steps_per_epoch
        eval_every = train_config.eval_every or steps_per_epoch
    eval_every = min(eval_every, total)
    save_every = min(train_config.save_every or eval_every, total)
    return StepPlan(
        total, eval_every, save_every, math.gcd(eval_every, save_every), steps_per_epoch
    )
