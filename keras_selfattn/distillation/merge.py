"""`merge_shards`: the files of a sharded `translate_pairs` put back in input
order, once every shard is complete and all of them read the same data with
the same teacher and search."""

import contextlib
import os
import pathlib

from keras_selfattn.distillation import record as records
from keras_selfattn.distillation.translate import DistilledPairs


def merge_shards(shard_outputs, out, *, verbose=True):
    """Interleaves the outputs of ``translate_pairs(..., shard=(i, N))``, i = 0
    .. N-1, into ``out``: the file one unsharded call writes.

    Input pair ``k`` is shard ``k % N``'s ``k // N``-th pair, so the merge takes
    the next line of shard 0, 1, ..., N-1 in turn (a pair a shard skipped,
    named in its ``.skipped`` file, takes no line). It first checks, each with
    one line naming the file: that every shard has its progress record and is
    complete, that the shards are 0 .. N-1 once each, that they were made with
    the same settings (teacher, data, search), that each holds the pairs its
    share of the input has, and that no file was changed since. ``out``, its
    ``.skipped`` file and a progress record (that of a complete unsharded call,
    so `translate_pairs` on it finds it done) are written under temporary names
    and renamed into place. When order does not matter (a student's training
    shuffles), ``cat`` of the shard files is the same set of lines.

    Args:
        shard_outputs: the shards' ``out`` files, in any order.
        out: the file to write; must not exist.
        verbose: print what was merged.

    Returns:
        A `DistilledPairs` of ``out``.

    Raises:
        ValueError: a shard is missing, incomplete, changed or of other
            settings, or ``out`` exists or is one of the shards.
        FileNotFoundError: a shard's file or record is missing.
    """
    paths = _shard_paths(shard_outputs)
    out = records.check_writable_output(out)
    if out.exists() or out in paths:
        raise ValueError(
            "out must be a new file (merge_shards does not replace a file). "
            f"Received: out={os.fspath(out)!r}"
        )
    shards = _ordered_shards(paths)
    total = sum(record.pairs_done for _, record in shards)
    _check_shares(shards, total)
    settings = dict(shards[0][1].settings, **{records.SHARD_SETTING: None})
    merged = records.ProgressRecord(
        settings,
        pairs_done=total,
        complete=True,
        teacher_run=shards[0][1].teacher_run,
        data_files=shards[0][1].data_files,
    )
    merged = _write_merged(shards, out, merged)
    if verbose:
        print(
            f"{out}: {len(shards)} shards merged: {total:,} pairs, "
            f"{merged.written:,} lines, {merged.skipped:,} skipped",
            flush=True,
        )
    return DistilledPairs(
        out, merged.pairs_done, merged.written, merged.skipped, True, 0
    )


def _shard_paths(shard_outputs):
    if isinstance(shard_outputs, (str, os.PathLike)) or not shard_outputs:
        raise ValueError(
            "shard_outputs must be a list of the shards' out files. "
            f"Received: shard_outputs={shard_outputs!r}"
        )
    return [pathlib.Path(path) for path in shard_outputs]


def _ordered_shards(paths):
    """``[(path, record)]`` by shard index, each checked complete and unchanged,
    all of one count and one set of settings."""
    shards = [(path, _complete_record(path)) for path in paths]
    count = shards[0][1].settings[records.SHARD_SETTING][1]
    by_index = {}
    for path, record in shards:
        index, its_count = record.settings[records.SHARD_SETTING]
        if its_count != count:
            raise ValueError(
                f"{path} is shard {index}/{its_count}, {paths[0]} one of {count}: "
                "merge the shards of one split"
            )
        if index in by_index:
            raise ValueError(f"{path} and {by_index[index][0]} are both shard {index}")
        by_index[index] = (path, record)
        _check_same_settings(paths[0], shards[0][1], path, record)
    missing = [str(i) for i in range(count) if i not in by_index]
    if missing:
        raise ValueError(
            f"shard(s) {', '.join(missing)} of {count} are missing: give every "
            f"shard's out. Received: {len(paths)} files"
        )
    return [by_index[i] for i in range(count)]


def _complete_record(path):
    record = records.read_record(path)
    if record is None:
        raise FileNotFoundError(
            f"{path}: no progress record ({records.record_path(path).name}); "
            "give the out files of translate_pairs(..., shard=...)"
        )
    if record.settings.get(records.SHARD_SETTING) is None:
        raise ValueError(f"{path} is not a shard (translate_pairs without shard)")
    if not record.complete:
        raise ValueError(
            f"{path} is not complete: {record.pairs_done:,} pairs done; run its "
            "translate_pairs call again to finish it"
        )
    for name, size in (
        (path, record.out_bytes),
        (records.skipped_path(path), record.skipped_bytes),
    ):
        actual = name.stat().st_size if name.exists() else 0
        if actual != size:
            raise ValueError(
                f"{name} holds {actual:,} bytes, its progress record {size:,}: it "
                "was changed since; translate that shard again"
            )
    return record


def _check_same_settings(first_path, first, path, record):
    difference = records.first_difference(
        first.settings, record.settings, ignore=(records.SHARD_SETTING,)
    )
    if difference:
        name, a, b = difference
        raise ValueError(
            f"{path} was made with {name}={b!r}, {first_path} with {name}={a!r}: "
            "merge the shards of one call"
        )


def _check_shares(shards, total):
    """Shard i of N holds the pairs of ``range(i, total, N)``: shards that read
    other data, or fewer pairs, hold another number."""
    count = len(shards)
    for index, (path, record) in enumerate(shards):
        share = len(range(index, total, count))
        if record.pairs_done != share:
            raise ValueError(
                f"{path} holds {record.pairs_done:,} input pairs, shard "
                f"{index}/{count} of {total:,} has {share:,}: the shards read "
                "different data"
            )


def _write_merged(shards, out, merged):
    """Writes ``out`` and its ``.skipped`` file (temporary names first), the
    record, then renames ``out`` into place last."""
    tmp_out = out.with_name("tmp-" + out.name)
    tmp_skipped = out.with_name("tmp-" + records.skipped_path(out).name)
    try:
        written, skipped = _interleave(shards, merged.pairs_done, tmp_out, tmp_skipped)
        expected = sum(record.written for _, record in shards)
        if written != expected:  # a shard holds lines past its pairs
            raise ValueError(
                f"the shards hold {expected:,} lines, their pairs {written:,}: a "
                "shard file was changed since; translate it again"
            )
        merged = merged.advanced(
            0,
            written,
            skipped,
            tmp_out.stat().st_size,
            tmp_skipped.stat().st_size,
        )
        records.write_record(out, merged)
        if skipped:
            os.replace(tmp_skipped, records.skipped_path(out))
        os.replace(tmp_out, out)
        records.fsync_directory(out.parent)
    finally:
        tmp_out.unlink(missing_ok=True)
        tmp_skipped.unlink(missing_ok=True)
    return merged


def _interleave(shards, total, tmp_out, tmp_skipped):
    """Writes the shards' lines in input order; ``(lines, skipped lines)``."""
    count = len(shards)
    skips = [_skipped_indexes(path) for path, _ in shards]
    pending = [next(skip, None) for skip in skips]
    written = skipped = 0
    with contextlib.ExitStack() as stack:
        readers = [stack.enter_context(open(path, "rb")) for path, _ in shards]
        sink = stack.enter_context(open(tmp_out, "wb"))
        side = stack.enter_context(open(tmp_skipped, "wb"))
        for index in range(total):
            shard = index % count
            if pending[shard] is not None and pending[shard][0] == index:
                side.write(pending[shard][1])
                pending[shard] = next(skips[shard], None)
                skipped += 1
                continue
            line = readers[shard].readline()
            if not line.endswith(b"\n"):
                raise ValueError(f"{shards[shard][0]} ends before input pair {index}")
            sink.write(line)
            written += 1
        for handle in (sink, side):
            handle.flush()
            os.fsync(handle.fileno())
    return written, skipped


def _skipped_indexes(path):
    """``(input index, the line)`` of each line of a shard's ``.skipped`` file."""
    name = records.skipped_path(path)
    if not name.exists():
        return
    with open(name, "rb") as handle:
        for line in handle:
            yield int(line.split(b"\t", 1)[0]), line
