"""`translate_pairs`: a teacher's translations of a pair file's sources, written
as a new pair file a batch at a time, resumable and shardable."""

import dataclasses
import hashlib
import math
import os
import pathlib

from keras_selfattn.choices import DEFAULT_LENGTH_PENALTY
from keras_selfattn.distillation import record as records
from keras_selfattn.distillation.progress import Progress, count_lines
from keras_selfattn.inference import load_translator
from keras_selfattn.run_directory.layout import CONFIG_FILE, MODEL_FILE
from keras_selfattn.search_settings import (
    check_max_length_ratio,
    check_precision,
    check_quantize,
)
from keras_selfattn.stopping import held, raise_if_swallowed, signals_stop
from keras_selfattn.text.pair_line import SPACE

DEFAULT_BATCH_SIZE = 64
DEFAULT_LOG_SECONDS = 30.0
_HASH_CHUNK = 1 << 20
# Why a pair is not written, in the words of ``OUT.skipped``: a pair reader
# would refuse the line (an empty target) or read another pair from it.
EMPTY = "empty translation"
LINE_BREAK = "translation holds a tab or line break"


@dataclasses.dataclass(frozen=True)
class DistilledPairs:
    """What `translate_pairs` (or `merge_shards`) left in ``out``.

    Attributes:
        out: the pair file.
        pairs: input pairs (of the shard) done, every call together.
        written: lines of ``out``.
        skipped: pairs not written (``OUT.skipped`` names them).
        complete: every input pair is done.
        resumed_at: pairs done before this call (0: it started the file).
    """

    out: pathlib.Path
    pairs: int
    written: int
    skipped: int
    complete: bool
    resumed_at: int = 0


# Long: mostly its docstring (the contract of the files it writes).
def translate_pairs(
    teacher_run,
    data,
    out,
    *,
    beam_size=1,
    batch_size=DEFAULT_BATCH_SIZE,
    shard=None,
    alpha=DEFAULT_LENGTH_PENALTY,
    precision="float32",
    quantize=None,
    shortlist=None,
    max_length_ratio=None,
    skip_malformed=False,
    strict_columns=False,
    verbose=True,
    log_seconds=DEFAULT_LOG_SECONDS,
    translator=None,
):
    """Translates the sources of pair files with a teacher run into a new pair file.

    Each line of ``out`` is ``source<TAB>teacher's translation``, in the input's
    order: the training data of a student by sequence-level knowledge
    distillation (Kim and Rush 2016). The sources are streamed
    (`text.stream.pair_stream`, one batch in memory), translated by the
    teacher's `inference.Translator` with the options its command line serves,
    and committed a batch at a time: the lines appended and fsynced, then
    ``OUT.progress.json`` replaced atomically. Stopped anyhow (Ctrl-C, SIGTERM,
    SIGHUP between two commits; SIGKILL or a power cut anywhere), the same call
    resumes: ``out`` is cut back to the bytes the record counts and the pairs
    it counts are skipped, so no line is lost or written twice. A call whose
    settings differ from the record's is refused, naming the stored value; the
    batch size may change. A pair whose translation is empty or holds a tab or
    line break is not written; ``OUT.skipped`` gives its index and why.

    Args:
        teacher_run: the teacher's run directory.
        data: pair file(s) or glob pattern(s), ``.gz`` too, read in sorted order
            one after the other; only the sources are used.
        out: the pair file to write (uncompressed, local).
        beam_size: 1 for greedy search.
        batch_size: sentences translated and committed together.
        shard: None, or ``(index, count)`` (or ``"index/count"``): this call
            takes the input pairs whose index (from 0, in reading order) modulo
            ``count`` is ``index``, into its own ``out``; `merge_shards` puts
            the shards' files back in input order.
        alpha: the beam search's length penalty.
        precision: the searches' products, ``"float32"`` or ``"bfloat16"``.
        quantize: None, or ``"int8"``.
        shortlist: None, or N: search over each batch's likely target pieces
            and the N most frequent (the teacher run's table).
        max_length_ratio: None, or each sentence's cap of output steps
            relative to its source.
        skip_malformed: skip malformed input lines instead of failing.
        strict_columns: an input line of more than two columns is malformed.
        verbose: print a line at the start, every ``log_seconds`` (pairs done,
            of how many when the files are plain local files, pairs/s, ETA)
            and at the end.
        log_seconds: seconds between two progress lines.
        translator: the teacher's `inference.Translator` when already loaded
            with these options (default: loaded from ``teacher_run``).

    Returns:
        A `DistilledPairs`.

    Raises:
        ValueError: a bad argument, a malformed input line, a record that
            differs or is damaged (one line naming the argument and value).
        FileNotFoundError: no teacher run or no data file.
        OSError: ``out``'s folder cannot be written.
        stopping.Stopped: a stopping signal (after the last commit).

    References:
        Kim and Rush 2016, "Sequence-Level Knowledge Distillation", EMNLP.
    """
    shard = parse_shard(shard)
    options = (beam_size, alpha, precision, quantize, shortlist, max_length_ratio)
    _check_search(*options)
    _check_positive("batch_size", batch_size)
    _check_log_seconds(log_seconds)
    out = records.check_writable_output(out)
    teacher = check_teacher(teacher_run)
    files = resolve_data(data, out)
    settings = _settings(teacher, files, shard, *options)
    settings.update(skip_malformed=bool(skip_malformed))
    settings.update(strict_columns=bool(strict_columns))
    record = _started_record(out, settings, teacher, files)
    if record.complete:
        Progress(out, record.pairs_done, None, log_seconds, verbose).finished(record)
        return _result(out, record, record.pairs_done)
    total = _shard_total(count_lines(files), shard) if verbose else None
    progress = Progress(out, record.pairs_done, total, log_seconds, verbose)
    with signals_stop():
        if translator is None:
            translator = load_translator(
                teacher,
                precision=precision,
                quantize=quantize,
                shortlist=shortlist,
                max_length_ratio=max_length_ratio,
            )
        _check_translator(translator, precision, quantize, shortlist, max_length_ratio)
        reading = _Reading(files, shard, batch_size, skip_malformed, strict_columns)
        return _translate(out, record, reading, translator, progress)


def parse_shard(shard):
    """``(index, count)`` of ``shard`` (None, ``(index, count)`` or ``"I/N"``),
    or None; a one-line ValueError naming the value otherwise."""
    if shard is None:
        return None
    parts = shard.split("/") if isinstance(shard, str) else shard
    try:
        index, count = (_integer(part) for part in parts)
    except (TypeError, ValueError):
        index = count = None
    if index is None or count is None or not 0 <= index < count:
        raise ValueError(
            "shard must be (index, count) or 'index/count' with 0 <= index < "
            "count (the input pairs whose index modulo count is index). "
            f"Received: shard={shard!r}"
        )
    return index, count


def _integer(value):
    """An int of an int or a decimal string, else None (a bool is no number)."""
    if isinstance(value, str):
        text = value.strip()
        return int(text) if text.lstrip("-").isdigit() else None
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return None


def _check_positive(name, value):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1. Received: {name}={value!r}")


def _check_log_seconds(value):
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not (math.isfinite(value) and value >= 0)
    ):
        raise ValueError(
            f"log_seconds must be a finite number >= 0. Received: log_seconds={value!r}"
        )


def _check_search(beam_size, alpha, precision, quantize, shortlist, ratio):
    """The search's options, each checked where its user checks it."""
    _check_positive("beam_size", beam_size)
    if (
        isinstance(alpha, bool)
        or not isinstance(alpha, (int, float))
        or not (math.isfinite(alpha) and alpha >= 0)
    ):
        raise ValueError(
            f"alpha must be a finite number >= 0. Received: alpha={alpha!r}"
        )
    check_precision(precision)
    check_quantize(quantize)
    check_max_length_ratio(ratio)
    if shortlist is not None:
        _check_positive("shortlist", shortlist)


def _check_translator(translator, precision, quantize, shortlist, ratio):
    """A given translator must search as the recorded settings say."""
    loaded = {
        "precision": translator.settings.precision,
        "quantize": translator.settings.quantize,
        "shortlist": translator.settings.shortlist is not None,
        "max_length_ratio": translator.settings.max_length_ratio,
    }
    given = {
        "precision": precision,
        "quantize": quantize,
        "shortlist": shortlist is not None,
        "max_length_ratio": check_max_length_ratio(ratio),
    }
    difference = records.first_difference(loaded, given)
    if difference:
        name, has, wanted = difference
        raise ValueError(
            f"translator searches with {name}={has!r}, but this call gives "
            f"{name}={wanted!r}: load it with the same options, or pass none"
        )


def check_teacher(teacher_run):
    """The teacher's run directory as a path; a one-line FileNotFoundError
    naming ``teacher_run`` when it is no finished run."""
    path = pathlib.Path(teacher_run)
    problem = None
    if not str(teacher_run).strip():
        problem = "it is empty"
    elif not path.is_dir():
        problem = "no such directory"
    else:
        missing = [n for n in (MODEL_FILE, CONFIG_FILE) if not (path / n).is_file()]
        if missing:
            problem = f"it is no finished run: missing {', '.join(missing)}"
    if problem:
        raise FileNotFoundError(
            f"teacher_run must be a trained run directory; {problem}. "
            f"Received: teacher_run={os.fspath(teacher_run)!r}"
        )
    return path


def model_digest(run_dir):
    """The SHA-256 of a run's ``model.keras``: the teacher, wherever it lies."""
    digest = hashlib.sha256()
    with open(pathlib.Path(run_dir) / MODEL_FILE, "rb") as handle:
        while chunk := handle.read(_HASH_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def resolve_data(data, out):
    """The files of ``data`` (`text.stream.resolve_data_files`), its errors
    naming the argument; ``out`` may not be one of them."""
    from keras_selfattn.text import stream

    try:
        files = stream.resolve_data_files(data)
    except (OSError, ValueError) as error:
        raise type(error)(f"{error}. Received: data={data!r}") from None
    if out.exists():
        for name in files:
            if os.path.exists(name) and os.path.samefile(name, out):
                raise ValueError(
                    "out is one of the data files (it would be overwritten). "
                    f"Received: out={os.fspath(out)!r}, data={data!r}"
                )
    return files


def _settings(teacher, files, shard, beam_size, alpha, precision, quantize, *rest):
    """What decides the lines written: compared on resume and across shards.
    The teacher and the data by content and size, not path, so that shards
    read on other machines merge."""
    import tensorflow as tf

    shortlist, max_length_ratio = rest
    data = [
        {"name": os.path.basename(name), "bytes": int(tf.io.gfile.stat(name).length)}
        for name in files
    ]
    return {
        "teacher_model_sha256": model_digest(teacher),
        "data": data,
        "beam_size": beam_size,
        "alpha": float(alpha),
        "precision": precision,
        "quantize": quantize,
        "shortlist": shortlist,
        "max_length_ratio": check_max_length_ratio(max_length_ratio),
        records.SHARD_SETTING: None if shard is None else list(shard),
    }


def _started_record(out, settings, teacher, files):
    """The record to go on from: a new one (``out`` started empty), or the
    stored one, its files cut back to what it counts; refused when the stored
    settings differ, or ``out`` holds lines and no record."""
    record = records.read_record(out)
    skipped = records.skipped_path(out)
    if record is None:
        if out.exists() and out.stat().st_size:
            raise ValueError(
                f"out exists and has no progress record "
                f"({records.record_path(out).name}): it was not written by "
                f"translate_pairs; remove it or choose another out. "
                f"Received: out={os.fspath(out)!r}"
            )
        record = records.ProgressRecord(
            settings, teacher_run=str(teacher), data_files=tuple(files)
        )
        records.write_record(out, record)
        out.write_bytes(b"")
        records.truncate_to_record(skipped, 0, "skipped pairs")
        return record
    difference = records.first_difference(record.settings, settings)
    if difference:
        name, stored, given = difference
        raise ValueError(
            f"{out} was started with {name}={stored!r} "
            f"({records.record_path(out).name}), this call gives {name}={given!r}: "
            "pass the same arguments to resume it, or choose another out"
        )
    records.truncate_to_record(out, record.out_bytes, "translations")
    records.truncate_to_record(skipped, record.skipped_bytes, "skipped pairs")
    return record


def _shard_total(total, shard):
    """The input lines a shard takes of ``total`` (None: unknown)."""
    if total is None or shard is None:
        return total
    index, count = shard
    return len(range(index, total, count))


@dataclasses.dataclass(frozen=True)
class _Reading:
    """How the sources are read: the files, the shard, the batch, the policy."""

    files: list
    shard: tuple | None
    batch_size: int
    skip_malformed: bool
    strict_columns: bool

    def global_index(self, index):
        """The input index of this shard's ``index``-th pair."""
        if self.shard is None:
            return index
        return index * self.shard[1] + self.shard[0]

    def batches(self, done):
        """Lists of sources after this shard's first ``done`` pairs, the
        batches of an uninterrupted call (``done`` is a sum of whole batches)."""
        from keras_selfattn.text import stream

        pairs = stream.pair_stream(
            self.files,
            skip_malformed=self.skip_malformed,
            strict_columns=self.strict_columns,
            cycle_length=1,  # the files one after the other, in order
        )
        sources = pairs.map(lambda source, target: source)
        if self.shard is not None:
            sources = sources.shard(self.shard[1], self.shard[0])
        batches = sources.skip(done).batch(self.batch_size).prefetch(1)
        iterator = iter(batches.as_numpy_iterator())
        while True:
            try:
                batch = next(iterator)
            except StopIteration:
                return
            except Exception as error:
                malformed = stream.malformed_line_error(error)
                if malformed is None:
                    raise
                raise malformed from None
            yield [source.decode("utf-8") for source in batch]


def _translate(out, record, reading, translator, progress):
    """Translates and commits batch after batch; the finished record."""
    settings = record.settings
    progress.started()
    try:
        with open(out, "ab") as handle:
            for batch in reading.batches(record.pairs_done):
                raise_if_swallowed()
                translations = translator.translate(
                    batch,
                    beam_size=settings["beam_size"],
                    alpha=settings["alpha"],
                    batch_size=len(batch),
                )
                first = reading.global_index(record.pairs_done)
                lines = _lines(translations, first, reading)
                record = _commit(out, handle, record, len(batch), *lines)
                progress.batch_done(record.pairs_done)
        record = dataclasses.replace(record, complete=True)
        records.write_record(out, record)
    except KeyboardInterrupt:
        progress.interrupted(record)
        raise
    progress.finished(record)
    return _result(out, record, progress.resumed_at)


def _lines(translations, first, reading):
    """``(pair lines, skipped lines)`` of a batch whose first pair has input
    index ``first``."""
    lines, skipped = [], []
    step = 1 if reading.shard is None else reading.shard[1]
    for offset, translation in enumerate(translations):
        text = translation.text
        problem = None
        if not text.strip(SPACE):
            problem = EMPTY
        elif any(c in text for c in "\t\r\n"):
            problem = LINE_BREAK
        if problem:
            skipped.append(f"{first + offset * step}\t{problem}\n")
        else:
            lines.append(f"{translation.source}\t{text}\n")
    return lines, skipped


def _commit(out, handle, record, pairs, lines, skipped):
    """Appends a batch's lines (and skipped lines), fsynced, then the record
    counting them; a stopping signal waits until the record is written."""
    with held():
        handle.write("".join(lines).encode("utf-8"))
        handle.flush()
        os.fsync(handle.fileno())
        skipped_bytes = record.skipped_bytes
        if skipped:
            with open(records.skipped_path(out), "ab") as side:
                side.write("".join(skipped).encode("utf-8"))
                side.flush()
                os.fsync(side.fileno())
                skipped_bytes = side.tell()
        record = record.advanced(
            pairs, len(lines), len(skipped), handle.tell(), skipped_bytes
        )
        records.write_record(out, record)
    return record


def _result(out, record, resumed_at):
    return DistilledPairs(
        out=out,
        pairs=record.pairs_done,
        written=record.written,
        skipped=record.skipped,
        complete=record.complete,
        resumed_at=resumed_at,
    )
