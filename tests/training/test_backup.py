"""Per-worker backups: atomic files, the last two kept, weights and optimizer back."""

import types

import keras
import numpy as np
import pytest

from keras_selfattn.training.fit.step_plan import StepPlan
from keras_selfattn.training.resume.backup import (
    WorkerBackup,
    backed_up_epochs,
    read_backup,
    restore_backup,
    stopped_early,
    worker_backup_dir,
)
from keras_selfattn.training.resume.restart import truncate_history


def small_model():
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [keras.Input((3,)), keras.layers.Dense(4), keras.layers.Dense(1)]
    )
    model.compile(keras.optimizers.Adam(0.05), "mse")
    return model


def data():
    rng = np.random.default_rng(0)
    return rng.normal(size=(32, 3)).astype("float32"), rng.normal(size=(32, 1)).astype(
        "float32"
    )


def test_backups_are_per_worker_and_keep_the_last_two(tmp_path):
    directory = worker_backup_dir(tmp_path / "backup", 1)
    assert directory == tmp_path / "backup" / "worker-1"
    model = small_model()
    x, y = data()
    backup = WorkerBackup(directory)
    model.fit(
        x,
        y,
        epochs=3,
        batch_size=8,
        verbose=0,
        validation_data=(x, y),
        callbacks=[backup],
    )
    assert backed_up_epochs(directory) == [2, 3]
    names = sorted(path.name for path in directory.iterdir())
    assert names == [
        "epoch-00002.json",
        "epoch-00002.weights.h5",
        "epoch-00003.json",
        "epoch-00003.weights.h5",
    ]
    state = read_backup(directory, 3)
    assert state["epoch"] == 3 and state["best"] == backup.best and state["best"] > 0


def test_an_incomplete_backup_does_not_count(tmp_path):
    model = small_model()
    x, y = data()
    model.fit(x, y, epochs=1, verbose=0, callbacks=[WorkerBackup(tmp_path)])
    (tmp_path / "epoch-00002.weights.h5").write_bytes(b"killed while writing the JSON")
    (tmp_path / "tmp-epoch-00003.weights.h5").write_bytes(
        b"killed while writing the weights"
    )
    assert backed_up_epochs(tmp_path) == [1]
    assert backed_up_epochs(tmp_path / "nowhere") == []


def test_restoring_gives_back_weights_and_optimizer_state(tmp_path):
    x, y = data()
    trained = small_model()
    trained.fit(
        x, y, epochs=2, batch_size=8, verbose=0, callbacks=[WorkerBackup(tmp_path)]
    )
    fresh = small_model()
    state = restore_backup(fresh, tmp_path, 2)
    assert state["epoch"] == 2
    for got, expected in zip(fresh.get_weights(), trained.get_weights(), strict=True):
        np.testing.assert_array_equal(got, expected)
    assert (
        int(fresh.optimizer.iterations.numpy())
        == int(trained.optimizer.iterations.numpy())
        == 8
    )
    # Continuing both gives the same result: nothing of the optimizer was lost.
    trained.fit(x, y, epochs=1, batch_size=8, verbose=0, shuffle=False)
    fresh.fit(x, y, epochs=1, batch_size=8, verbose=0, shuffle=False)
    for got, expected in zip(fresh.get_weights(), trained.get_weights(), strict=True):
        np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_a_resumed_history_keeps_each_step_once(tmp_path):
    history = tmp_path / "history.csv"
    history.write_text(
        "step,epoch,loss\n4,0,3.0\n8,1,2.5\n12,2,2.4\n"
    )  # the period to step 12 ran, its backup was lost
    plan = StepPlan(total_steps=12, eval_every=4, save_every=4, period=4)
    truncate_history(history, plan, 2)
    assert history.read_text().splitlines() == ["step,epoch,loss", "4,0,3.0", "8,1,2.5"]


def test_a_resumed_run_written_before_steps_keys_its_old_history(tmp_path):
    """history.csv of a run written when its rows were keyed by epoch only."""
    history = tmp_path / "history.csv"
    history.write_text("epoch,loss\n0,3.0\n1,2.5\n2,2.4\n")
    plan = StepPlan(total_steps=10, eval_every=4, save_every=4, period=4)
    truncate_history(history, plan, 2)
    assert history.read_text().splitlines() == ["step,epoch,loss", "4,0,3.0", "8,1,2.5"]
    truncate_history(history, plan, 3)  # nothing past step 10 to drop
    assert len(history.read_text().splitlines()) == 3
    truncate_history(tmp_path / "absent.csv", plan, 1)  # no history: nothing done
    assert not (tmp_path / "absent.csv").exists()


def test_an_early_stopped_run_says_the_score_it_followed(tmp_path):
    from keras_selfattn.config import TrainConfig
    from keras_selfattn.training.resume import continuation

    backup = worker_backup_dir(tmp_path / "backup", 0)
    backup.mkdir(parents=True)
    (backup / "epoch-00002.json").write_text('{"epoch": 2, "step": 8, "wait": 1}')
    plan = StepPlan(total_steps=12, eval_every=4, save_every=4, period=4)
    for best_by, shown in (("chrf", "chrF"), ("bleu", "BLEU"), ("loss", "loss")):
        with pytest.raises(ValueError) as caught:
            continuation._check_backup_continues(
                backup,
                2,
                {"steps": 8, "best_by": best_by},
                (TrainConfig(patience=1), TrainConfig(patience=1)),
                (plan, {"train_pairs": None}),
                "refused",
            )
        assert (
            f"with no better validation {shown} (--best-by {best_by}) for 1 "
            "validations" in str(caught.value)
        )


def test_an_input_checkpoint_of_another_pipeline_is_replayed_instead(tmp_path):
    """A backup written before `INPUT_PIPELINE` (its iterator checkpoint of the
    graph that counted every pass) cannot restore into today's graph: resumed by
    reading the batches again (input_checkpoint None), not refused as damaged."""
    from keras_selfattn.training.resume.backup import INPUT_PIPELINE, input_checkpoint

    backup = worker_backup_dir(tmp_path / "backup", 0)
    backup.mkdir(parents=True)
    state = backup / "epoch-00001.json"
    state.write_text('{"epoch": 1, "step": 4, "input": "epoch-00001.input-1"}')
    assert input_checkpoint(backup, 1) is None
    state.write_text(
        '{"epoch": 1, "step": 4, "input": "epoch-00001.input-1", '
        f'"input_pipeline": {INPUT_PIPELINE}}}'
    )
    assert input_checkpoint(backup, 1) == backup / "epoch-00001.input-1"


class _StopAfter(keras.callbacks.Callback):
    """Stops the fit at the end of epoch ``epoch`` (as early stopping does)."""

    def __init__(self, epoch):
        super().__init__()
        self.epoch = epoch

    def on_epoch_end(self, epoch, logs=None):
        if epoch == self.epoch:
            self.model.stop_training = True


def test_the_period_where_the_run_stops_is_backed_up(tmp_path):
    """Backups every 4 steps of periods of 1; the run stops at step 3: backed up
    there too, with the early-stopping count that says it stopped
    (`stopped_early`)."""
    model = small_model()
    x, y = data()
    plan = StepPlan(total_steps=8, eval_every=1, save_every=4, period=1)
    early = types.SimpleNamespace(wait=2)
    backup = WorkerBackup(tmp_path, plan=plan, early_stopping=early)
    callbacks = [_StopAfter(2), backup]
    model.fit(x, y, epochs=8, steps_per_epoch=1, verbose=0, callbacks=callbacks)
    assert backed_up_epochs(tmp_path) == [3]
    state = read_backup(tmp_path, 3)
    assert state["step"] == 3 and state["wait"] == 2
    assert stopped_early(state, patience=2) and not stopped_early(state, patience=3)
    assert stopped_early({"wait": 1}, patience=0)  # stops at the first one
    assert not stopped_early({"wait": 0}, patience=0)
    assert not stopped_early({}, patience=4)  # a backup that never counted


def test_a_backup_records_the_last_health_and_the_counts(tmp_path):
    """What a call that resumes with every step done writes as the run's summary."""
    model = small_model()
    x, y = data()
    health = types.SimpleNamespace(to_dict=lambda: {"ok": True})
    counters = types.SimpleNamespace(values=lambda: {"pairs": 32, "too_long": 1})
    backup = WorkerBackup(
        tmp_path,
        validation=types.SimpleNamespace(health=health),
        counters=counters,
    )
    model.fit(x, y, epochs=1, batch_size=8, verbose=0, callbacks=[backup])
    state = read_backup(tmp_path, 1)
    assert state["health"] == {"ok": True}
    assert state["counts"] == {"pairs": 32, "too_long": 1}
    no_health = WorkerBackup(
        tmp_path / "none", validation=types.SimpleNamespace(health=None)
    )
    model.fit(x, y, epochs=1, batch_size=8, verbose=0, callbacks=[no_health])
    assert read_backup(tmp_path / "none", 1)["health"] is None
    assert "counts" not in read_backup(tmp_path / "none", 1)
