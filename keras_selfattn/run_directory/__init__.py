"""The run directory (``keras-selfattn train --out RUN_DIR``): its layout and records.

- `layout`: every file and folder name, and `RunLayout`, the paths of one run;
- `settings`: ``config.json`` (the model and training settings);
- `metrics`: ``metrics.json``; `history`: ``history.csv``;
- `vocabulary_settings`: the tokenizer settings a vocabulary was built with;
- `rerun`: the run's state, and what a rerun of `train` on it takes from it;
- `consistency`: whether the parts belong together;
- `damaged`: one line naming a damaged file and what to do;
- `atomic`: writing a file atomically.

Only the standard library and the configuration dataclasses are imported here, so
reading a run never pulls in TensorFlow or the trainer.
"""
