"""A run that outlives one `train` call: claiming the directory (`run_state`,
`run_lock`), the per-worker backups (`backup`), where a resumed run restarts
(`restart`), continuing a finished run (`continuation`) and the data fingerprint
a resume checks (`data_fingerprint`). The run directory's files and records are
`keras_selfattn.run_directory`'s."""
