"""The progress lines: one per step shown, the validation on a line of its own,
and an ETA that counts the validations left, estimated until one was timed
(clock times given by the test)."""

import re

from keras_selfattn.training.callbacks import progress
from keras_selfattn.training.callbacks.progress import (
    ProgressLog,
    estimated_validation_steps,
)
from keras_selfattn.training.fit.step_plan import StepPlan


def test_the_eta_counts_the_validations_left(monkeypatch, capsys):
    """Steps of 1 s, validations of 10 s every 4 steps of 12: after the first
    validation the ETA is the steps left plus 10 s per validation left."""
    clock = [100.0]
    monkeypatch.setattr(progress.time, "perf_counter", lambda: clock[0])
    plan = StepPlan(total_steps=12, eval_every=4, save_every=4, period=4)
    log = ProgressLog(1, plan.total_steps, plan=plan)
    log.on_train_begin()
    for epoch in range(plan.periods):
        log.on_epoch_begin(epoch)
        for batch in range(plan.period):
            log.on_train_batch_begin(batch)
            clock[0] += 5.0 if epoch == batch == 0 else 1.0  # the first compiles
            log.on_train_batch_end(batch, {"loss": 1.0})
        log.on_epoch_end(epoch, {})
        clock[0] += 10.0  # the validation
    lines = capsys.readouterr().out.splitlines()
    steps = [
        int(re.match(r"step (\d+)/12  loss 1\.0000  ETA ", line)[1]) for line in lines
    ]
    assert steps == list(range(1, 13))  # one line per step, the last one too
    eta = {step: line.rsplit("ETA ", 1)[1] for step, line in zip(steps, lines)}
    assert eta[1] == "--"  # the compiling step is left out
    assert eta[2] == "0:00:10"  # 10 steps; no validation timed, none estimated
    assert eta[3] == "0:00:09"
    # From the first validation on: the steps left + 10 s per validation left.
    assert eta[5] == f"0:00:{7 + 20:02d}"
    assert eta[8] == f"0:00:{4 + 20:02d}"  # its own validation is still to come
    assert eta[9] == f"0:00:{3 + 10:02d}"
    assert eta[12] == "0:00:10"  # the last validation


def test_without_a_plan_the_eta_counts_steps(monkeypatch, capsys):
    clock = [0.0]
    monkeypatch.setattr(progress.time, "perf_counter", lambda: clock[0])
    log = ProgressLog(2, 8)
    log.on_train_begin()
    log.on_epoch_begin(0)
    for batch in range(8):
        log.on_train_batch_begin(batch)
        clock[0] += 2.0
        log.on_train_batch_end(batch, {"loss": 0.5})
    lines = capsys.readouterr().out.splitlines()
    assert [line.split("  ")[0] for line in lines] == [
        "step 2/8",
        "step 4/8",
        "step 6/8",
        "step 8/8",
    ]
    assert lines[2].endswith("ETA 0:00:04") and lines[3].endswith("ETA 0:00:00")


def test_the_first_eta_estimates_the_validations(monkeypatch, capsys):
    """Steps of 1 s, validations of 45 s every 10 steps of 40: the first line's
    ETA already counts the validations (estimated, within 2x of the time left),
    and from the first validation on the ETA counts the one timed."""
    clock = [0.0]
    monkeypatch.setattr(progress.time, "perf_counter", lambda: clock[0])
    plan = StepPlan(total_steps=40, eval_every=10, save_every=10, period=10)
    # 30 validation batches, 500 translations of up to 20 tokens: 30 steps.
    estimate = estimated_validation_steps(30, 500, 20)
    assert estimate == 30
    log = ProgressLog(5, plan.total_steps, plan=plan, validation_steps=estimate)
    log.on_train_begin()
    printed_at = {}  # step: the clock when its line was printed
    for epoch in range(plan.periods):
        log.on_epoch_begin(epoch)
        for batch in range(plan.period):
            log.on_train_batch_begin(batch)
            clock[0] += 5.0 if epoch == batch == 0 else 1.0  # the first compiles
            log.on_train_batch_end(batch, {"loss": 1.0})
            printed_at[log.step] = clock[0]
        log.on_epoch_end(epoch, {})
        clock[0] += 45.0  # the validation, its backup and checkpoints
    end = clock[0]
    lines = capsys.readouterr().out.splitlines()
    eta = {}
    for line in lines:
        step, shown = re.fullmatch(
            r"step (\d+)/40  loss 1\.0000  ETA (.*)", line
        ).groups()
        hours, minutes, seconds = map(int, shown.split(":"))
        eta[int(step)] = 3600 * hours + 60 * minutes + seconds
    assert sorted(eta) == list(range(5, 41, 5))
    # The first line: 35 steps, 4 validations of 30 steps, the first one's
    # tracing (the first step's 4 extra seconds); 215 s are left.
    assert eta[5] == 35 + 4 * 30 + 4
    for step, seconds in eta.items():
        left = end - printed_at[step]
        assert left / 2 <= seconds <= 2 * left, (step, seconds, left)
    # Once a validation was timed, it replaces the estimate.
    assert eta[15] == 25 + 3 * 45 == end - printed_at[15]
    assert eta[40] == 45
