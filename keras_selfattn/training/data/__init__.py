"""A run's data: the streamed files and held-out splits (`run_data`), the batches
(`run_batches`) and the tokenizers (`run_tokenizer`)."""
