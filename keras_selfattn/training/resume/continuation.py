"""Continuing a finished run: the same `train` with more ``train_steps`` or ``epochs``.

A finished run keeps its newest backup (`run_state.prune_backups`): the weights, the
optimizer state (with its step count), the best validation loss, the early
stopping count, the dropout seeds and the input position. `reopen_finished_run`
checks that a new call only trains longer, then turns the finished run back
into an interrupted one, which `train` resumes as it resumes any other: from
that backup, keeping ``model.keras`` (the best model so far, replaced only by a
better one) and ``history.csv`` (new rows appended).

What may differ (`config.CONTINUATION_FIELDS`): ``train_steps`` and ``epochs``
(the new total must be larger than the steps trained), ``eval_every`` and
``save_every`` as long as the new plan's period still ends where the backup was
taken, ``patience`` (a larger one continues a run that stopped early), and
where the run trains (`config.PLACEMENT_FIELDS`). Anything else (a model
setting, another data file, another seed...) is refused, naming it. The
optimizer's step count continues (no second warm-up);
``lr_schedule="inverse_sqrt"`` does not depend on the run's length, ``"cosine"``
stretches its decay to the new end from the step reached (as OpenNMT-tf does
when ``max_step`` grows).

A run that stopped early (no better validation score, by its ``best_by``:
chrF by default, for ``patience`` validations) is not continued under that
``patience``: it would stop again at its next validation.
"""

import dataclasses
import pathlib

from keras_selfattn.config import (
    CONTINUATION_FIELDS,
    PLACEMENT_FIELDS,
)
from keras_selfattn.run_directory.consistency import check_run_parts
from keras_selfattn.run_directory.damaged import read_run_json
from keras_selfattn.run_directory.history import (
    HISTORY_STEP,
    history_with_steps,
    read_history,
    write_history,
)
from keras_selfattn.run_directory.layout import (
    CONFIG_FILE,
    DATA_FILE,
    FINISHED_FILE,
    RunLayout,
)
from keras_selfattn.run_directory.settings import load_run_config, save_run_config
from keras_selfattn.training.resume.backup import (
    backed_up_epochs,
    check_backup,
    read_backup,
    stopped_early,
)

__all__ = ["MAY_GROW", "reopen_finished_run"]

# The training fields a continuation may change (with the plan's period kept).
MAY_GROW = CONTINUATION_FIELDS


def _changes(saved, current, skip=()):
    saved, current = dataclasses.asdict(saved), dataclasses.asdict(current)
    return [
        f"{name} {saved[name]!r} -> {current[name]!r}"
        for name in saved
        if name not in skip and saved[name] != current.get(name)
    ]


def reopen_finished_run(
    run_dir,
    model_config,
    train_config,
    *,
    data=None,
    valid_data=None,
    test_data=None,
    verbose=True,
):
    """Turns the finished run in ``run_dir`` back into an interrupted one to go on.

    Args:
        run_dir: a finished run directory (`run_state.run_dir_state`).
        model_config: the `ModelConfig` of the new call.
        train_config: the `TrainConfig` of the new call.
        data: the data of the new call, as `train` takes it (file pattern(s),
            None for the bundled corpus; pairs given as a list are not checked
            here, `train` still checks them).
        valid_data: the validation file pattern(s) of the new call.
        test_data: the test file pattern(s) of the new call.
        verbose: print the one line saying that the run continues.

    Returns:
        That line.

    Raises:
        ValueError: the run cannot be continued by this call (the message says
            why: nothing to train, another setting, other data, an early stop,
            no backup kept).
    """
    run_dir = pathlib.Path(run_dir)
    refuse = (
        f"{run_dir} holds a finished run; choose another run directory, or pass "
        "--overwrite (overwrite=True) to replace it"
    )
    backup_dir = RunLayout(run_dir).worker_backup(0)  # the chief's
    last_backup = _last_backup(backup_dir, refuse)
    saved_train = _check_only_length_changes(
        run_dir, model_config, train_config, refuse
    )
    record = read_run_json(run_dir / DATA_FILE)
    _check_same_data(
        record, train_config, refuse, data, valid_data=valid_data, test_data=test_data
    )
    summary = read_run_json(run_dir / FINISHED_FILE)
    done = summary["steps"]
    new_plan = _longer_plan(train_config, record, done, refuse)
    configs = (saved_train, train_config)
    plan = (new_plan, record)
    _check_backup_continues(backup_dir, last_backup, summary, configs, plan, refuse)
    _key_history_by_step(run_dir, saved_train, record)
    _mark_interrupted(run_dir, model_config, train_config)
    line = (
        f"continuing the finished run in {run_dir} from step {done} to step "
        f"{new_plan.total_steps} (its best model and history are kept)"
    )
    if verbose:
        print(line)
    return line


def _last_backup(backup_dir, refuse):
    """The epoch of the chief's last backup (the run must have kept one)."""
    epochs = backed_up_epochs(backup_dir)
    if not epochs:
        raise ValueError(
            f"{refuse} (it kept no backup to continue from: it finished before "
            "runs kept their last backup)"
        )
    return epochs[-1]


def _check_only_length_changes(run_dir, model_config, train_config, refuse):
    """The saved `TrainConfig`, once the new call changes only what may change
    (and the run's parts agree: `check_run_parts`)."""
    check_run_parts(run_dir)
    saved_model, saved_train = load_run_config(run_dir / CONFIG_FILE)
    changed = _changes(saved_model, model_config) + _changes(
        saved_train, train_config, skip=MAY_GROW + PLACEMENT_FIELDS
    )
    if changed:
        raise ValueError(
            f"{refuse}; only a larger --train-steps or --epochs continues it, and this "
            f"call changes {', '.join(changed)}"
        )
    return saved_train


def _check_same_data(record, train_config, refuse, data, *, valid_data, test_data):
    """The new call's data files are those of ``data.json``'s ``record``."""
    from keras_selfattn.training.data import run_data as run_data_lib

    if data is None:
        from keras_selfattn import text

        data = text.bundled_dates_path()
    if run_data_lib.given_pairs(data):  # `train` checks them
        return
    _, fingerprint = run_data_lib.data_fingerprint(
        data, train_config, valid_data=valid_data, test_data=test_data
    )
    change = run_data_lib.describe_data_change(record["fingerprint"], fingerprint)
    if change:
        raise ValueError(f"{refuse}; it cannot continue on other data: {change}")


def _longer_plan(train_config, record, done, refuse):
    """The new call's `StepPlan`, which must train past the ``done`` steps."""
    from keras_selfattn.training.fit.step_plan import plan_steps

    new_plan = plan_steps(train_config, record["train_pairs"])
    if new_plan.total_steps <= done:
        raise ValueError(
            f"{refuse}, or continue it with a larger --train-steps or --epochs (it "
            f"trained {done} steps; this call asks for {new_plan.total_steps})"
        )
    return new_plan


# What the early-stopping message calls each `TrainConfig.best_by`.
_SCORE_NAMES = {"chrf": "chrF", "bleu": "BLEU", "loss": "loss"}


def _check_backup_continues(backup_dir, epoch, summary, configs, plan, refuse):
    """The last backup (``epoch``) ends the run and a period of the new plan, and
    it is whole (`backup.check_backup`: a damaged file refused before any change).

    ``summary``: ``training.json``, the steps the run trained and the score it
    followed (``best_by``: "loss" where it had no translations to score).
    ``configs``: the saved `TrainConfig` and the new call's (a run that stopped
    early continues under a larger ``patience``, the new call's); ``plan``: the
    new call's `StepPlan` and ``data.json``'s record.
    """
    saved_train, train_config = configs
    new_plan, record = plan
    from keras_selfattn.training.fit.step_plan import plan_steps

    done = summary["steps"]
    best_by = summary.get("best_by") or saved_train.best_by
    state = read_backup(backup_dir, epoch)
    # The last step is always backed up: a run that went on past its last
    # backup, or whose backup counts `patience` validations without progress,
    # stopped early.
    patience = train_config.patience
    if state.get("step") != done or stopped_early(state, patience):
        raise ValueError(
            f"{refuse}: it stopped early, after {done} steps, with no better "
            f"validation {_SCORE_NAMES.get(best_by, best_by)} (--best-by "
            f"{best_by}) for {patience} validations; training longer with that "
            "--patience would stop again"
        )
    if new_plan.step_after(epoch) != done:
        old_plan = plan_steps(saved_train, record["train_pairs"])
        raise ValueError(
            f"{refuse}; its last backup (step {done}) does not end a period of this "
            f"call's plan (validation every {new_plan.eval_every} steps, backups "
            f"every {new_plan.save_every}): pass --eval-every {old_plan.eval_every} "
            f"--save-every {old_plan.save_every} as the finished run had them"
        )
    check_backup(backup_dir, epoch)


def _key_history_by_step(run_dir, saved_train, record):
    """A ``history.csv`` written before its rows were keyed by step gets its
    steps from the finished run's own plan (this call's may have another period)."""
    from keras_selfattn.training.fit.step_plan import plan_steps

    path = RunLayout(run_dir).history
    rows = read_history(path)
    if rows and any(not row.get(HISTORY_STEP) for row in rows):
        old_plan = plan_steps(saved_train, record["train_pairs"])
        write_history(path, history_with_steps(rows, old_plan.step_after))


def _mark_interrupted(run_dir, model_config, train_config):
    """Saves the new configuration, then removes the finished mark.

    Killed in between, the same call finds a finished run with its own settings
    and continues it all the same.
    """
    save_run_config(run_dir / CONFIG_FILE, model_config, train_config)  # atomically
    (run_dir / FINISHED_FILE).unlink()
