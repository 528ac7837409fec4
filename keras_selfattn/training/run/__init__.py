"""A run's life on disk: claiming the directory (`run_dir`, `run_lock`), the
per-worker backups (`backup`), resuming (`resume`), continuing a finished run
(`continuation`) and the data fingerprint a resume checks (`data_fingerprint`).
The names of the files are `keras_selfattn.run_directory.layout`'s."""
