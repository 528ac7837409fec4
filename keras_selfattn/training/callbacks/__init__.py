"""The callbacks `train` gives ``model.fit``: one job each, one module each.

In the order a period's end runs them (`training.fit.fit_callbacks.fit_callbacks`):

- `training.moving_average.SwapInMovingAverage`: the weights' moving average in
  the model (beside the rest of the moving average's work);
- `progress.TrainingSpeed`: the one measure of target tokens/s;
- `stop_at_step.StopAtStep`: the run ends at its plan's last step;
- `progress.ProgressBar` / `progress.ProgressLog`: the steps on screen;
- `validation.Validation`: the validation figures, written into ``logs``;
- `best_model.BestModel`: ``model.keras`` kept by the chosen figure;
- `early_stopping.EarlyStopping`: ``patience`` validations without progress;
- `progress.ValidationLog`: the lines of each validation;
- `health.HealthAlarm`: a warning when the model stops translating;
- `tensorboard.TensorBoardLog`: TensorBoard event files;
- `kept_checkpoints.KeepCheckpoints`: the checkpoints kept for averaging;
- `history.HistoryLog`: ``history.csv``;
- then the backup (`training.resume.backup.WorkerBackup`).

A callback writes its figure into ``logs``; the ones after it read it there.
"""
