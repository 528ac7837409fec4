"""The fit loop: `train` (the orchestrator), its stages, the step plan
(`step_plan`), the compiled model; the callbacks ``model.fit`` runs are in
`keras_selfattn.training.callbacks`, the weights' moving average in
`keras_selfattn.training.moving_average`, checkpoint averaging in
`keras_selfattn.training.checkpoint_averaging`."""
