"""Publishing a version folder: version numbers, staging folder, fsync, atomic rename.

TF Serving watches a model's base folder and loads every purely numeric subfolder
as a version. A version is written into a ``.export-tmp-*`` folder inside the base
(TF Serving ignores it), flushed to disk, and renamed into place when complete:
a server watching the base never sees half a version, a failed export leaves no
``BASE/N``, and an existing version is never overwritten.

One writer per version: an export of a chosen version N first claims it with
``BASE/.export-lock-N`` (created exclusively, holding the writer's process id), so
that a second export of N at the same moment is refused at once, naming the version
and the process writing it, instead of failing at the rename after all its work.
A claim whose process is gone (killed) is stale and taken over.
"""

import contextlib
import os
import pathlib
import shutil
import tempfile

from keras_selfattn.choices import DEFAULT_MODEL_NAME

__all__ = [
    "DEFAULT_MODEL_NAME",
    "LOCK_PREFIX",
    "TEMP_PREFIX",
    "VersionTaken",
    "claimed_version",
    "list_versions",
    "next_version",
    "publish",
    "resolve_version",
    "staging_folder",
]

TEMP_PREFIX = ".export-tmp-"
# BASE/.export-lock-N: version N is being written by the process whose id it holds.
LOCK_PREFIX = ".export-lock-"


class VersionTaken(FileExistsError):
    """The version asked for exists, or another live process is writing it."""


def list_versions(export_base):
    """The sorted version numbers in ``export_base`` (folders named by an integer).

    Args:
        export_base: a model's base folder.

    Returns:
        list of int.
    """
    export_base = pathlib.Path(export_base)
    if not export_base.is_dir():
        return []
    return sorted(
        int(p.name) for p in export_base.iterdir() if p.name.isdigit() and p.is_dir()
    )


def next_version(export_base):
    """One more than the highest version in ``export_base``; 1 for a new or empty base.

    Args:
        export_base: a model's base folder.

    Returns:
        int.

    Example:

    >>> import tempfile
    >>> base = pathlib.Path(tempfile.mkdtemp())
    >>> next_version(base)
    1
    >>> for name in ("1", "7", ".export-tmp-x", "notes"):
    ...     (base / name).mkdir()
    >>> next_version(base)  # TF Serving's versions are the numeric folders
    8
    """
    versions = list_versions(export_base)
    return versions[-1] + 1 if versions else 1


def resolve_version(export_base, version=None):
    """The version to write, checked before any work is done.

    Args:
        export_base: a model's base folder.
        version: a non-negative int, or None for `next_version`.

    Returns:
        ``(version, automatic)``: the number and whether it was chosen here (an
        automatic number moves on if another export takes it meanwhile).

    Raises:
        ValueError: ``version`` is not a non-negative integer.
        VersionTaken: ``export_base/version`` exists, or (a chosen version) another
            live process is writing it.
    """
    export_base = pathlib.Path(export_base)
    automatic = version is None
    if automatic:
        version = next_version(export_base)
    elif not isinstance(version, int) or isinstance(version, bool) or version < 0:
        raise ValueError(
            f"version must be a non-negative integer. Received: version={version!r}"
        )
    _refuse_taken(export_base, version)
    if not automatic:
        writer = _live_writer(_lock_path(export_base, version))
        if writer is not None:
            raise _being_written(export_base, version, writer)
    return version, automatic


def _refuse_taken(export_base, version):
    target = export_base / str(version)
    if target.exists():
        raise VersionTaken(f"{target} exists; versions are never overwritten")


def _being_written(export_base, version, writer):
    return VersionTaken(
        f"{export_base / str(version)} is being written by another export "
        f"(process {writer}, {_lock_path(export_base, version)}); versions are "
        "never overwritten"
    )


def _lock_path(export_base, version):
    return pathlib.Path(export_base) / f"{LOCK_PREFIX}{version}"


def _live_writer(lock):
    """The process id a claim holds while that process lives; None otherwise (no
    claim, a claim still being written, or a stale one)."""
    try:
        writer = int(lock.read_text(encoding="ascii").strip())
    except (OSError, ValueError):
        return None
    if writer <= 0:  # not a process id (0 and -N would signal process groups)
        return None
    try:
        os.kill(writer, 0)
    except ProcessLookupError:
        return None
    except PermissionError:  # alive, another user's
        return writer
    return writer


def _create_claim(lock):
    """Creates ``lock`` exclusively with this process' id; False if it exists."""
    try:
        descriptor = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(descriptor, "w", encoding="ascii") as handle:
        handle.write(f"{os.getpid()}\n")
    return True


@contextlib.contextmanager
def claimed_version(export_base, version=None):
    """The version to write, held by this process until the block ends.

    A chosen version is claimed with ``BASE/.export-lock-N``; a claim left by a
    process that no longer runs is taken over. An automatic number needs no claim:
    `publish` moves it on when another export takes it meanwhile.

    Args:
        export_base: a model's base folder (created if missing).
        version: a non-negative int, or None for `next_version`.

    Yields:
        ``(version, automatic)``, as `resolve_version` returns.

    Raises:
        ValueError: ``version`` is not a non-negative integer.
        VersionTaken: the version exists, or another live process is writing it.
    """
    export_base = pathlib.Path(export_base)
    version, automatic = resolve_version(export_base, version)
    if automatic:
        yield version, automatic
        return
    export_base.mkdir(parents=True, exist_ok=True)
    lock = _lock_path(export_base, version)
    if not _create_claim(lock):
        writer = _live_writer(lock)
        if writer is not None:
            raise _being_written(export_base, version, writer)
        with contextlib.suppress(FileNotFoundError):
            lock.unlink()  # stale: its writer is gone
        if not _create_claim(lock):  # another export took it over first
            raise _being_written(export_base, version, _live_writer(lock) or "?")
    try:
        # Checked again under the claim: an export that held it may have
        # published the version since resolve_version looked.
        _refuse_taken(export_base, version)
        yield version, automatic
    finally:
        with contextlib.suppress(FileNotFoundError):
            lock.unlink()


@contextlib.contextmanager
def staging_folder(export_base):
    """A new ``.export-tmp-*`` folder inside ``export_base`` (created if missing),
    removed with whatever is left in it on exit.

    Args:
        export_base: a model's base folder.

    Yields:
        The folder, a `pathlib.Path`.
    """
    export_base = pathlib.Path(export_base)
    export_base.mkdir(parents=True, exist_ok=True)
    folder = pathlib.Path(tempfile.mkdtemp(prefix=TEMP_PREFIX, dir=export_base))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _fsync_tree(root):
    """Flushes everything under ``root`` to disk (the rename publishes whole files)."""
    for folder, _, files in os.walk(root):
        for name in files:
            with open(os.path.join(folder, name), "rb") as handle:
                os.fsync(handle.fileno())
        _fsync_folder(folder)


def _fsync_folder(folder):
    descriptor = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def publish(staged_dir, export_base, version, automatic):
    """Flushes ``staged_dir`` to disk and renames it to ``export_base/version``.

    The rename is atomic on one file system and never replaces an existing version.

    Args:
        staged_dir: the complete version folder, inside ``export_base``.
        export_base: the model's base folder.
        version: the version number.
        automatic: when True and another export took ``version`` meanwhile, use the
            next free number instead of failing.

    Returns:
        The published folder, a `pathlib.Path`.

    Raises:
        VersionTaken: ``automatic`` is False and ``export_base/version`` exists.
    """
    export_base = pathlib.Path(export_base)
    _fsync_tree(staged_dir)
    for _ in range(100):
        target = export_base / str(version)
        try:
            _refuse_taken(export_base, version)
            os.rename(staged_dir, target)  # fails on a non-empty target
            _fsync_folder(export_base)
            return target
        except OSError as error:
            if not target.exists():
                raise
            if not automatic:
                if isinstance(error, VersionTaken):
                    raise
                raise VersionTaken(
                    f"{target} exists; versions are never overwritten"
                ) from error
            version = next_version(export_base)
    raise RuntimeError(f"Could not find a free version number in {export_base}")
