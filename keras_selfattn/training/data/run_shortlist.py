"""A run's vocabulary shortlist, learned by streaming its training split once.

Training writes it (`write_run_shortlist`, at the end of a run, from the
training pairs it streamed: `keras_selfattn.training.fit.stages`); for a run
trained without it, ``keras-selfattn shortlist`` learns it (`learn_run_shortlist`)
from the training split the run recorded: its files and held-out split as
``data.json`` recorded them (refused when the files changed since), read with
the run's data settings. Either way the pairs are tokenized with the run's
tokenizer a batch at a time, and only the vocabulary-sized counts
(`text.shortlist.CooccurrenceCounts`) are held. The searches only read the
table (`inference.TrainedRun.shortlist`).
"""

import pathlib

from keras_selfattn import text
from keras_selfattn.run_directory.damaged import read_run_json
from keras_selfattn.run_directory.layout import CONFIG_FILE, DATA_FILE
from keras_selfattn.run_directory.settings import load_run_config
from keras_selfattn.text.shortlist import (
    DEFAULT_FREQUENT,
    DEFAULT_PER_SOURCE,
    CooccurrenceCounts,
    check_shortlist_sizes,
)
from keras_selfattn.training.data import run_data as run_data_lib
from keras_selfattn.training.resume.data_fingerprint import file_fingerprint

__all__ = ["count_pairs", "learn_run_shortlist", "write_run_shortlist"]

LEARNED_FROM = "the training split of the run"


def count_pairs(pairs, tokenizer, batch_size=512):
    """`CooccurrenceCounts` of a `tf.data.Dataset` of ``(source, target)`` strings.

    Each batch is tokenized with ``tokenizer`` (a `text.PairTokenizer`) and
    counted; nothing but the counts outlives the batch.
    """
    counts = CooccurrenceCounts(
        tokenizer.source_vocab_size, tokenizer.target_vocab_size
    )
    for sources, targets in pairs.batch(batch_size):
        source_ids = tokenizer.source.encode(sources).to_list()
        target_ids = tokenizer.target.encode(targets).to_list()
        for s, t in zip(source_ids, target_ids, strict=True):
            counts.add(s, t)
    return counts


def _same_content(path, entry):
    """Whether ``path`` has the recorded size and head (`file_fingerprint`)."""
    found = file_fingerprint(str(path))
    return all(found[key] == entry[key] for key in ("bytes", "head_sha256"))


def _located(run_dir, entry):
    """The path of a file ``data.json`` recorded, or None.

    As recorded when it exists there (an absolute name, or one relative to the
    directory the command runs in: a changed file is refused further on, as
    on resume); else the recorded relative name under the run directory or one
    of its parents (the directory training ran in), where a file of the
    recorded size and head is found.
    """
    name = pathlib.Path(entry["file"])
    if name.exists():
        return str(name)
    if name.is_absolute():
        return None
    run_dir = run_dir.resolve()
    for base in (run_dir, *run_dir.parents):
        path = base / name
        if path.is_file() and _same_content(path, entry):
            return str(path)
    return None


def _recorded_files(run_dir, record):
    """``{role: paths}`` of the files ``data.json``'s fingerprint ``record``
    names, located (`_located`); a FileNotFoundError naming the first one gone."""
    files = {}
    for role in ("data", "valid_data", "test_data"):
        if role not in record:
            continue
        files[role] = [_located(run_dir, entry) for entry in record[role]]
        for entry, path in zip(record[role], files[role], strict=True):
            if path is None:
                raise FileNotFoundError(
                    f"The training file {entry['file']} of {run_dir} is gone (not "
                    "where the run recorded it, nor under the run directory or its "
                    "parents); the shortlist is learned from the files the run "
                    "trained on"
                )
    return files


def _run_training_pairs(run_dir):
    """The run's training pairs (a dataset), as `training_pairs` streams them."""
    for name in (DATA_FILE, CONFIG_FILE):
        if not (run_dir / name).exists():
            raise FileNotFoundError(
                f"{run_dir} has no {name}, so no recorded training split to learn a "
                f"shortlist from. Received: run_dir={str(run_dir)!r}"
            )
    _, train_config = load_run_config(run_dir / CONFIG_FILE)
    record = read_run_json(run_dir / DATA_FILE)["fingerprint"]
    located = _recorded_files(run_dir, record)
    recorded = {role: [entry["file"] for entry in record[role]] for role in located}
    held = {role: located[role] for role in located if role != "data"}
    if located == recorded:
        run_data = run_data_lib.prepare_run_data(
            located["data"], run_dir, train_config, **held
        )
    else:  # found elsewhere, with the recorded contents: the recorded split
        run_data = run_data_lib.recorded_run_data(
            run_dir,
            located["data"],
            record,
            valid_given="valid_data" in held,
            test_given="test_data" in held,
        )
    return run_data_lib.training_pairs(run_data, train_config)


def learn_run_shortlist(
    run_dir, per_source=DEFAULT_PER_SOURCE, frequent=DEFAULT_FREQUENT, save=True
):
    """Learns the shortlist of the run in ``run_dir`` from its training split.

    Args:
        run_dir: a trained run directory (its data.json, config.json, tokenizer).
        per_source: int > 0, target pieces kept per source piece.
        frequent: int > 0, most frequent target pieces kept for every batch.
        save: write ``run_dir/shortlist.npz`` (atomically).

    Returns:
        The `text.shortlist.ShortlistTable`; its ``record`` names the run and
        the files it was learned from, and its size.
    """
    per_source, frequent = check_shortlist_sizes(per_source, frequent)
    run_dir = pathlib.Path(run_dir)
    pairs = _run_training_pairs(run_dir)
    tokenizer = text.PairTokenizer.load(run_dir)
    table = count_pairs(pairs, tokenizer).table(per_source, frequent)
    record = read_run_json(run_dir / DATA_FILE)["fingerprint"]
    files = _recorded_files(run_dir, record)["data"]
    table.record.update({"learned_from": LEARNED_FROM, "files": files})
    if save:
        table.save(run_dir)
    return table


def write_run_shortlist(run_dir, run_data, train_config, tokenizer):
    """Writes ``run_dir/shortlist.npz`` (the default sizes) from the training
    pairs of ``run_data`` (`run_data.training_pairs`), as training streams
    them; returns the `text.shortlist.ShortlistTable`."""
    pairs = run_data_lib.training_pairs(run_data, train_config)
    table = count_pairs(pairs, tokenizer).table()
    table.record.update(
        {"learned_from": LEARNED_FROM, "files": [str(f) for f in run_data.files]}
    )
    table.save(run_dir)
    return table
