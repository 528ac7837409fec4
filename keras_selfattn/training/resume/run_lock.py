"""One writer at a time in a run directory: a lock taken before anything is written.

`train` and `average` (which replaces ``model.keras``) hold it while they write;
readers (translate, evaluate, export) take no lock: every file they read is
replaced atomically.

`hold_and_claim_run_dir` makes the directory, takes the lock, and only then
looks at what the directory holds (`run_state.claim_run_dir`). The lock is a POSIX
``flock`` on ``RUN_DIR/train.lock``, taken without waiting: a second `train` on
the same directory raises `RunDirBusy` (the command exits 2) with one line
naming the holder, as the holder wrote it into the file: host, process id, since
when and its command. The kernel releases a ``flock`` when its holder dies, so
a lock left by a killed process (SIGKILL, OOM killer, a lost machine's process
on a local disk) is simply taken over: nothing to clean up by hand.

`RunLock.release` (at the end of `train`, whatever the outcome) removes the file
while still holding the lock. A process that opened the file just before then
finds, once it holds the lock, that the name no longer leads to its file (the
inode differs or is gone) and starts again with a new file, so two processes
never both believe they hold the directory.

Several workers: only the chief writes the run directory and holds the lock;
the other workers do not touch it.

This module imports no TensorFlow (a helper process can hold a lock cheaply).

Remote paths (``gs://``, ``s3://``, ``hdfs://``...): `train` writes its run
directory through the local file system (``pathlib``), so such a path is
refused here with a clear error instead of silently becoming a local folder
named ``gs:``. A bucket mounted as a folder (gcsfuse, s3fs) gives no lock
across machines (its ``flock`` is local to one machine); NFS gives one where its
lock manager runs. See docs/operations.md.
"""

import dataclasses
import datetime
import fcntl
import json
import os
import pathlib
import re
import shlex
import shutil
import socket
import sys

from keras_selfattn.run_directory.layout import LOCK_FILE

__all__ = ["LOCK_FILE", "RunDirBusy", "RunLock", "hold_and_claim_run_dir"]


_REMOTE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


class RunDirBusy(ValueError):
    """Another process holds the run directory's lock (the message names it)."""


@dataclasses.dataclass
class RunLock:
    """A held run-directory lock: ``path``, the lock file, and ``fd`` with the flock."""

    path: pathlib.Path
    fd: int | None

    @classmethod
    def acquire(cls, run_dir) -> "RunLock":
        """Takes ``run_dir``'s lock (the directory exists) or raises `RunDirBusy`."""
        path = pathlib.Path(run_dir) / LOCK_FILE
        while True:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                job, holder = _read_holder(fd)
                os.close(fd)
                raise RunDirBusy(
                    f"{run_dir} is in use by another {job} ({holder}; lock file "
                    f"{path}); wait for it to end or stop it, or choose another --out"
                ) from None
            except BaseException:
                os.close(fd)
                raise
            if _same_file(path, fd):
                break
            os.close(fd)  # its holder removed the file as we opened it: again
        lock = cls(path, fd)
        lock._write_holder()
        return lock

    def _write_holder(self):
        """Who holds the lock, for the message of a second `train` (in place: the
        inode is the lock; a reader that meets a half-written file says so)."""
        holder = {
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "since": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "command": recorded_command(sys.argv),
        }
        data = (json.dumps(holder) + "\n").encode("utf-8")
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, data, 0)
        os.fsync(self.fd)

    def release(self):
        """Removes the lock file (if it is still this lock's) and releases the lock."""
        if self.fd is None:
            return
        try:
            if _same_file(self.path, self.fd):
                self.path.unlink()
        except OSError:
            pass  # the directory is gone (a failed run removed it)
        finally:
            os.close(self.fd)  # releases the flock
            self.fd = None

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.release()


_COMMAND_LIMIT = 3000  # JSON bytes: the holder record is read in 4096 bytes


def recorded_command(argv, limit=_COMMAND_LIMIT):
    """The command line as the lock records it: whole (shell-quoted), or, when its
    JSON form is longer than ``limit`` bytes, cut with a mark saying how many
    characters were left out."""
    command = shlex.join(str(arg) for arg in argv)
    kept = len(command)
    while len(json.dumps(command[:kept])) > limit:
        kept = min(kept - 1, kept * limit // len(json.dumps(command[:kept])))
    if kept == len(command):
        return command
    return f"{command[:kept]} ... [cut: {len(command) - kept} more characters]"


def _same_file(path, fd):
    try:
        named, held = os.stat(path), os.fstat(fd)
        return (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino)
    except FileNotFoundError:
        return False


# The commands that write into a run directory, as the holder's message names them.
_WRITERS = ("train", "average", "demo")


def _read_holder(fd):
    """``(job, holder)``: the holder's command ("train", "average"... or
    "process") and who it is."""
    try:
        holder = json.loads(os.pread(fd, 4096, 0).decode("utf-8"))
        where = (
            f"host {holder['host']}, process {holder['pid']}, since {holder['since']}"
        )
    except (ValueError, KeyError, TypeError, OSError):
        return "process", "a process that has not written its name yet"
    words = str(holder.get("command", "")).split()
    job = next((word for word in words if word in _WRITERS), "process")
    return job, where


def hold_and_claim_run_dir(run_dir, *, overwrite=False, reopen=None):
    """Makes ``run_dir``, takes its lock, then claims it (`run_state.claim_run_dir`).

    Args:
        run_dir: the run directory.
        overwrite: empty a finished or foreign directory instead of refusing.
        reopen: called with ``run_dir`` (holding the lock) when it holds a
            finished run and ``overwrite`` is false: it turns the run back into
            an interrupted one or raises (`continuation.reopen_finished_run`).

    Returns:
        ``(state, created, lock)``: the run directory's state before (see
        `claim_run_dir`), whether this call created the directory, and the held
        `RunLock` (release it when the run ends).

    Raises:
        RunDirBusy: another process holds the lock.
        ValueError: a remote path, or what `claim_run_dir` refuses.
    """
    from keras_selfattn.training.resume.run_state import (  # imports TensorFlow
        claim_run_dir,
        run_dir_state,
    )

    if _REMOTE.match(str(run_dir)):
        raise ValueError(
            f"the run directory must be a local path (train writes it through the "
            f"local file system); write the run locally and copy it. "
            f"Received: run_dir={str(run_dir)!r}"
        )
    path = pathlib.Path(run_dir)
    if not str(run_dir).strip() or (path.exists() and not path.is_dir()):
        claim_run_dir(run_dir, overwrite=overwrite)  # raises, naming the problem
    created = not path.exists()
    path.mkdir(parents=True, exist_ok=True)
    lock = RunLock.acquire(path)
    try:
        if reopen and not overwrite and run_dir_state(path) == "finished":
            reopen(path)
        state, _ = claim_run_dir(path, overwrite=overwrite)
    except BaseException:
        if created:
            shutil.rmtree(path, ignore_errors=True)
        lock.release()
        raise
    return state, created, lock
