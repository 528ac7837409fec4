"""Sentence-pair files streamed through ``tf.data``: nothing corpus-sized in memory.

`resolve_data_files` turns ``--data`` values (files, glob patterns, repeated) into
a sorted list of files through ``tf.io.gfile`` (so ``gs://`` works wherever
TensorFlow has that filesystem), failing clearly on a pattern that matches
nothing, a missing or empty file, a directory, or a pipe (read more than once). A
path that exists is that file before it is tried as a pattern (a name may hold
``[`` or ``*``). `pair_stream` reads them with
`tf.data.TextLineDataset` (``.gz`` decompressed), interleaved over the files, and
parses every line inside the graph, a batch at a time, as `pair_line` defines a
line (`pair_line.parse_lines`; `corpus.read_pairs` reads by the same definition).
A ``.gz`` file is decompressed once when it is resolved
(`compressed.check_compressed_file`): TensorFlow's reader ends a truncated file
without an error.

Malformed lines (no tab, an empty side, bytes that are not UTF-8) follow one of two
policies: by default the stream fails with ``FILE:LINE: what is wrong: 'the line'``
(`malformed_line_error` turns TensorFlow's error into that `ValueError`); with
``skip_malformed=True`` they are dropped and counted in a `StreamCounters`
variable, reported at the end of a run. A line with more than two columns (a
tab inside the target, as on line 7366 of Multi30k's ``train.de``) keeps its
first two and is counted (``extra_columns``); with ``strict_columns=True`` it is
malformed instead.
"""

import codecs
import dataclasses
import functools
import os
import re
import stat
from collections.abc import Sequence

import tensorflow as tf

from keras_selfattn.text.compressed import check_compressed_file
from keras_selfattn.text.pair_line import parse_lines

__all__ = [
    "StreamCounters",
    "extra_columns_report",
    "malformed_line_error",
    "pair_stream",
    "pair_stream_passes",
    "resolve_data_files",
]

_PARSE_BATCH = 4096
_MARK = "keras_selfattn malformed line: "
_MARK_PATTERN = re.compile(re.escape(_MARK) + r"(.*)")


def resolve_data_files(data: str | os.PathLike | Sequence[str | os.PathLike]) -> list:
    """The files named by ``data``: one file or glob pattern, or a list of them.

    A path that exists is that file (its name may hold glob characters); every
    other pattern must match at least one file; directories, pipes and empty
    files are refused, and so is a truncated or corrupt ``.gz`` file (each is
    decompressed once, `compressed.check_compressed_file`). The result is sorted
    within each pattern and free of duplicates.

    Args:
        data: a path or glob (``shards/*.tsv.gz``), or a sequence of them.

    Returns:
        List of file names (`str`).

    Raises:
        FileNotFoundError: a pattern matches nothing.
        ValueError: ``data`` is empty, a match is a directory, a pipe or device,
            or an empty file.
        compressed.CompressedFileError: a ``.gz`` match is truncated or corrupt.

    Example:

    >>> import pathlib, tempfile
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (folder / "a.tsv").write_text("x\\ty\\n")
    >>> [pathlib.Path(f).name for f in resolve_data_files(str(folder / "*.tsv"))]
    ['a.tsv']
    """
    patterns = [data] if isinstance(data, (str, os.PathLike)) else list(data)
    if not patterns:
        raise ValueError(f"No data files given. Received: data={data!r}")
    files = []
    for pattern in patterns:
        for name in _pattern_matches(os.fspath(pattern), data):
            if name not in files:
                files.append(name)
    for name in files:
        check_compressed_file(name)
    return files


def _pattern_matches(pattern, data):
    """The sorted files that ``pattern`` (one of ``data``) names; errors as above."""
    if not pattern:
        raise ValueError(f"A data pattern is empty. Received: data={data!r}")
    if tf.io.gfile.isdir(pattern):
        raise ValueError(
            f"Expected a sentence-pair file or glob pattern, got a directory: "
            f"{pattern} (use {os.path.join(pattern, '*')!r} for its files)"
        )
    # A file that exists is that file, whatever characters its name holds
    # ("[", "*", "?" would make it a pattern that does not match itself).
    exists = tf.io.gfile.exists(pattern)
    matches = [pattern] if exists else sorted(tf.io.gfile.glob(pattern))
    if not matches:
        raise FileNotFoundError(
            f"No sentence-pair file matches {pattern!r}"
            + ("" if any(c in pattern for c in "*?[") else " (file not found)")
        )
    for name in matches:
        if tf.io.gfile.isdir(name):
            raise ValueError(
                f"Expected a sentence-pair file, got a directory: {name} "
                f"(matched by {pattern!r})"
            )
        _refuse_pipe(name, pattern)
        if tf.io.gfile.stat(name).length == 0:
            raise ValueError(
                f"{name}: the file is empty; expected lines of 'source<TAB>target'"
            )
    return matches


def _refuse_pipe(name, pattern):
    """A local pipe or device is refused: a stream reads its files more than once
    (its size would read as 0, "the file is empty")."""
    try:
        mode = os.stat(name).st_mode
    except OSError:
        return  # a remote file system's path
    if not stat.S_ISREG(mode):
        raise ValueError(
            f"{name} is not a regular file (a pipe or device; matched by "
            f"{pattern!r}): sentence-pair files are read more than once; write "
            "the pairs to a file (.gz files are read as they are)"
        )


@dataclasses.dataclass
class StreamCounters:
    """Counts kept by a stream while it runs (int64 variables, read with ``int(...)``).

    Attributes:
        malformed: malformed lines skipped (``skip_malformed=True`` only).
        pairs: pairs that reached the length check (a training stream counts
            its first pass only: distinct pairs, `pair_stream_passes`).
        too_long: pairs dropped for being longer than the model's limits (of
            those counted in ``pairs``).
        target_tokens: real target tokens (with ``</s>``) of the batches made.
        extra_columns: lines read with more than two tab-separated columns
            (columns after the second ignored; ``strict_columns=False`` only).
    """

    malformed: tf.Variable
    pairs: tf.Variable
    too_long: tf.Variable
    target_tokens: tf.Variable
    extra_columns: tf.Variable

    @classmethod
    def create(cls):
        """Fresh counters at 0, on the host."""
        with tf.device("/CPU:0"):
            return cls(
                *(
                    tf.Variable(0, dtype=tf.int64, trainable=False, name=field.name)
                    for field in dataclasses.fields(cls)
                )
            )

    def variables(self) -> dict:
        """Name -> variable, e.g. for a `tf.train.Checkpoint`."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    def values(self) -> dict:
        """Name -> current `int` value."""
        return {name: int(v.numpy()) for name, v in self.variables().items()}


def _file_lines(name):
    compression = tf.where(
        tf.strings.regex_full_match(name, r".*\.[gG][zZ]"), "GZIP", ""
    )
    lines = tf.data.TextLineDataset(name, compression_type=compression)
    return lines.enumerate(start=1).map(
        lambda number, line: (name, number, line),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=True,
    )


# Long: a 40-line docstring (arguments, example); the code is 25 lines.
def pair_stream(
    files: Sequence[str],
    *,
    skip_malformed: bool = False,
    strict_columns: bool = False,
    counters: StreamCounters | None = None,
    repeat: bool = False,
    seed: int | None = None,
    cycle_length: int = 4,
) -> tf.data.Dataset:
    """Streams ``(source, target)`` scalar `tf.string` pairs from pair files.

    Files are interleaved (``cycle_length`` open at once, one line from each in
    turn; deterministic). With ``repeat=True`` the files are read again and again,
    their order reshuffled each pass from ``seed`` when there are several (with
    ``counters``, the first pass from ``seed``, the next ones from ``seed + 1``).

    Args:
        files: file names (`resolve_data_files`).
        skip_malformed: drop malformed lines (counted in ``counters.malformed``)
            instead of failing on the first one.
        strict_columns: a line with more than two columns is malformed (by
            default its first two are kept, counted in ``counters.extra_columns``).
        counters: where to count skipped lines and lines with extra columns
            (default: not counted); with ``repeat``, only the first pass counts.
        repeat: read the files forever.
        seed: file-order shuffle seed for ``repeat`` (None: file order).
        cycle_length: files read in parallel.

    Returns:
        `tf.data.Dataset` of ``(source, target)``.

    Example:

    >>> import pathlib, tempfile
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "p.tsv"
    >>> _ = path.write_text("Go.\\tVa !\\tCC-BY\\n\\nHi.\\tSalut.\\n")
    >>> pairs = pair_stream([str(path)]).as_numpy_iterator()
    >>> [(s.decode(), t.decode()) for s, t in pairs]
    [('Go.', 'Va !'), ('Hi.', 'Salut.')]
    """
    if repeat and counters is not None:
        # The first pass counts (distinct pairs), the ones after it do not.
        first, later = pair_stream_passes(
            files,
            skip_malformed=skip_malformed,
            strict_columns=strict_columns,
            counters=counters,
            seed=seed,
            cycle_length=cycle_length,
        )
        return first.concatenate(later)
    read = _pass_reader(files, skip_malformed, strict_columns, cycle_length)
    if not repeat:  # read once, in the order given
        return read(None, counters)
    # Repeated whole: each pass reads every file once (under FILE auto-sharding,
    # every file of this worker) before the next pass begins.
    return read(seed, None).repeat()


def pair_stream_passes(
    files: Sequence[str],
    *,
    skip_malformed: bool = False,
    strict_columns: bool = False,
    counters: StreamCounters | None = None,
    seed: int | None = None,
    cycle_length: int = 4,
) -> tuple:
    """``(first, later)``: the first pass of ``pair_stream(..., repeat=True)`` with
    ``counters`` and the passes after it, as two datasets (``first.concatenate(
    later)`` is that stream). What counts pairs downstream (the length check)
    counts on ``first`` only, so that its counts are of distinct pairs.

    ``first`` reads the files in an order drawn from ``seed`` and counts in
    ``counters``; ``later`` reads them forever from ``seed + 1`` (reshuffled each
    pass) and counts nothing. Arguments as `pair_stream`'s.
    """
    read = _pass_reader(files, skip_malformed, strict_columns, cycle_length)
    rest_seed = None if seed is None else seed + 1
    return read(seed, counters), read(rest_seed, None).repeat()


def _pass_reader(files, skip_malformed, strict_columns, cycle_length):
    """``read(seed, counters)``: one pass over ``files`` (`_one_pass`)."""
    return functools.partial(
        _one_pass,
        _given_files(files),
        skip_malformed=skip_malformed,
        strict_columns=strict_columns,
        cycle_length=cycle_length,
    )


def _given_files(files):
    files = [os.fspath(f) for f in files]
    if not files:
        raise ValueError("pair_stream: no files given")
    return files


def _one_pass(files, seed, counters, *, skip_malformed, strict_columns, cycle_length):
    """One pass over ``files`` (their order drawn from ``seed``; None: as given)."""
    check = functools.partial(
        _check,
        strict_columns=strict_columns,
        skip_malformed=skip_malformed,
        counters=counters,
    )
    names = _file_names(files, seed)
    return _checked_pairs(names, len(files), cycle_length, check)


def _file_names(files, seed):
    """A dataset of the file names, reshuffled each pass when ``seed`` is given."""
    names = tf.data.Dataset.from_tensor_slices(files)
    if seed is not None and len(files) > 1:
        names = names.shuffle(len(files), seed=seed, reshuffle_each_iteration=True)
    return names


def _checked_pairs(names, file_count, cycle_length, check):
    """The lines of the files ``names`` gives, interleaved, parsed and checked."""
    parallel = {"num_parallel_calls": tf.data.AUTOTUNE, "deterministic": True}
    # Plain graph code, no Python control flow on tensors: AutoGraph's conversion
    # would only cost time.
    lines = names.interleave(
        tf.autograph.experimental.do_not_convert(_file_lines),
        cycle_length=max(1, min(cycle_length, file_count)),
        block_length=1,
        **(parallel if file_count > 1 else {}),
    )
    return (
        lines.batch(_PARSE_BATCH)
        .map(
            tf.autograph.experimental.do_not_convert(check),
            num_parallel_calls=tf.data.AUTOTUNE,
            deterministic=True,
        )
        .unbatch()
    )


def _check(names, numbers, lines, *, strict_columns, skip_malformed, counters):
    """Parses a batch of lines; counts, skips or fails on the malformed ones."""
    source, target, blank, problem, message, extra = parse_lines(
        names, numbers, lines, strict_columns
    )
    bad = tf.not_equal(problem, "")
    if counters is not None:
        counters.extra_columns.assign_add(tf.reduce_sum(tf.cast(extra, tf.int64)))
    if skip_malformed:
        if counters is not None:
            counters.malformed.assign_add(tf.reduce_sum(tf.cast(bad, tf.int64)))
    else:
        first_bad = tf.gather(
            tf.concat([message, [""]], 0),
            tf.argmax(tf.concat([tf.cast(bad, tf.int32), [1]], 0)),
        )
        assertion = tf.debugging.Assert(
            ~tf.reduce_any(bad), [tf.strings.join([_MARK, first_bad])]
        )
        with tf.control_dependencies([assertion]):
            source = tf.identity(source)
    keep = ~blank & ~bad
    return tf.boolean_mask(source, keep), tf.boolean_mask(target, keep)


def extra_columns_report(count):
    """The end-of-run note on lines of over two columns (``--strict-columns``)."""
    lines = "1 line" if count == 1 else f"{count} lines"
    return (
        f"{lines} had more than two tab-separated columns; columns after the second "
        "were ignored (--strict-columns makes them errors)"
    )


def malformed_line_error(error: BaseException) -> ValueError | None:
    """The ``FILE:LINE: what is wrong`` `ValueError` in a TensorFlow error, or None."""
    match = _MARK_PATTERN.search(str(error))
    if not match:
        return None
    text = match.group(1).rstrip()
    text = text.removesuffix("]")
    # The assertion prints the message C-escaped (quotes, tabs, backslashes).
    raw = codecs.escape_decode(text.encode("utf-8"))[0]
    return ValueError(raw.decode("utf-8", errors="replace"))
