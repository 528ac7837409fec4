"""The fit loop: `train` (the orchestrator), the step plan and its validation
(`step_loop`, `watch`), the compiled model, the kept checkpoints (`averaging`)."""
