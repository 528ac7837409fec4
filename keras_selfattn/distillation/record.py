"""The files a distillation job writes beside its output, and their one owner.

``OUT`` holds the pairs; ``OUT.progress.json`` (`record_path`) the job's
settings and how far it got: the input pairs done (``pairs_done``) and the bytes
of ``OUT`` and ``OUT.skipped`` (`skipped_path`) that hold their lines. The
record is written after the lines it counts are on disk (fsynced), atomically
(a temporary file fsynced and renamed), so it never counts a line that is not
there; bytes past its count are a chunk whose record was not written, and a
resumed job cuts them off (`truncate_to_record`). Standard library only.
"""

import dataclasses
import json
import math
import os
import pathlib
import tempfile

from keras_selfattn.run_directory.atomic import replace_atomically

RECORD_SUFFIX = ".progress.json"
SKIPPED_SUFFIX = ".skipped"
RECORD_FORMAT = 1
# What a shard's settings may differ in from its siblings' (merge_shards).
SHARD_SETTING = "shard"


def record_path(out):
    """``OUT.progress.json``: the progress record of the output ``out``."""
    out = pathlib.Path(out)
    return out.with_name(out.name + RECORD_SUFFIX)


def skipped_path(out):
    """``OUT.skipped``: the pairs not written, ``INDEX<TAB>reason`` a line."""
    out = pathlib.Path(out)
    return out.with_name(out.name + SKIPPED_SUFFIX)


@dataclasses.dataclass(frozen=True)
class ProgressRecord:
    """How far a distillation job got, and with which settings.

    Attributes:
        settings: what decides the lines written (teacher, data, search,
            shard), compared on resume (`first_difference`).
        pairs_done: input pairs (of this shard) translated and committed.
        written: lines in ``OUT``.
        skipped: lines in ``OUT.skipped``.
        out_bytes: the bytes of ``OUT`` holding the ``written`` lines.
        skipped_bytes: the bytes of ``OUT.skipped`` holding the ``skipped`` lines.
        complete: every input pair is done.
        teacher_run: where the teacher was read (for the reader; not compared).
        data_files: the files read (for the reader; not compared).
    """

    settings: dict
    pairs_done: int = 0
    written: int = 0
    skipped: int = 0
    out_bytes: int = 0
    skipped_bytes: int = 0
    complete: bool = False
    teacher_run: str = ""
    data_files: tuple = ()

    def advanced(self, pairs, written, skipped, out_bytes, skipped_bytes):
        """This record after a chunk of ``pairs`` input pairs was committed."""
        return dataclasses.replace(
            self,
            pairs_done=self.pairs_done + pairs,
            written=self.written + written,
            skipped=self.skipped + skipped,
            out_bytes=out_bytes,
            skipped_bytes=skipped_bytes,
        )


def write_record(out, record):
    """Writes ``record`` to ``OUT.progress.json``: fsynced, renamed into place,
    the directory fsynced (a power cut keeps the old record or the new one)."""
    path = record_path(out)
    text = json.dumps({"format": RECORD_FORMAT, **dataclasses.asdict(record)}, indent=1)

    def write(tmp):
        with open(tmp, "w", encoding="utf-8") as handle:
            handle.write(text + "\n")
            handle.flush()
            os.fsync(handle.fileno())

    replace_atomically(write, path)
    fsync_directory(path.parent)


def fsync_directory(directory):
    """Makes a rename in ``directory`` durable (where the system allows it)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def read_record(out):
    """The `ProgressRecord` of ``out``, or None when it has none.

    Raises:
        ValueError: the record is damaged (not JSON, fields missing, another
            format), naming it.
    """
    path = record_path(out)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        values = json.loads(text)
        if values.pop("format") != RECORD_FORMAT:
            raise ValueError("another format")
        values["data_files"] = tuple(values.get("data_files", ()))
        return ProgressRecord(**values)
    except (ValueError, TypeError, KeyError, AttributeError) as error:
        raise ValueError(
            f"{path}: damaged ({type(error).__name__}: {error}); remove {out} and "
            "its .progress.json and .skipped files to translate it again"
        ) from None


def first_difference(stored, given, ignore=()):
    """``(name, stored value, given value)`` of the first setting that differs
    between two settings dicts (those in ``ignore`` aside), or None."""
    for name in sorted(set(stored) | set(given)):
        if name in ignore:
            continue
        a, b = stored.get(name), given.get(name)
        if a != b and not _both_nan(a, b):
            return name, a, b
    return None


def _both_nan(a, b):
    return isinstance(a, float) and isinstance(b, float) and math.isnan(a + b)


def check_writable_output(out, argument="out"):
    """``out`` as a path, refused (one line naming ``argument`` and the value)
    when empty, remote, compressed or a directory, or when its folder cannot be
    written (the folder is created)."""
    if not str(out).strip():
        raise ValueError(f"{argument} must name a file. Received: {argument}={out!r}")
    text = os.fspath(out)
    if "://" in text:
        raise ValueError(
            f"{argument} must be a local file (it is appended to and cut back on "
            f"resume); copy it afterwards. Received: {argument}={text!r}"
        )
    if text.lower().endswith(".gz"):
        raise ValueError(
            f"{argument} must be an uncompressed file (it is appended to and cut "
            f"back on resume); compress it afterwards (gzip). Received: "
            f"{argument}={text!r}"
        )
    path = pathlib.Path(text)
    if path.is_dir():
        raise ValueError(
            f"{argument} is a directory; name a file in it. Received: "
            f"{argument}={text!r}"
        )
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path.parent, prefix="tmp-writable-"):
            pass
    except OSError as error:
        raise OSError(
            f"{argument}: the folder {path.parent} cannot be written "
            f"({error.strerror or error}). Received: {argument}={text!r}"
        ) from None
    return path


def truncate_to_record(path, size, what):
    """Cuts ``path`` back to ``size`` bytes (a chunk the record does not count),
    creating it empty when ``size`` is 0; refuses a file shorter than its record.
    """
    path = pathlib.Path(path)
    actual = path.stat().st_size if path.exists() else None
    if actual is None and size == 0:
        return
    if actual is None or actual < size:
        held = "is missing" if actual is None else f"holds {actual:,} bytes"
        raise ValueError(
            f"{path} {held}, but its progress record counts {size:,} bytes of "
            f"{what}: it was changed since; remove it and its .progress.json "
            "and .skipped files to translate it again"
        )
    if actual > size:
        with open(path, "r+b") as handle:
            handle.truncate(size)
            handle.flush()
            os.fsync(handle.fileno())
