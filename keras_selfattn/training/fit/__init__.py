"""The fit loop: `train` (the orchestrator), its stages, the step plan
(`step_plan`), the compiled model, checkpoint averaging (`averaging`); the
callbacks ``model.fit`` runs are in `keras_selfattn.training.callbacks`."""
