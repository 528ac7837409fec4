"""What a distillation job prints: where it starts, a progress line every
``log_seconds`` off a terminal as `train` prints its steps (pairs done, of how
many when that is known cheaply, pairs/s and the ETA), and how it ended."""

import os
import time

from keras_selfattn.distillation.record import skipped_path
from keras_selfattn.text.compressed import is_gzip_name
from keras_selfattn.training.callbacks.progress import clock

_CHUNK = 1 << 20


def count_lines(files):
    """The lines of ``files`` when they are plain local files (read once, a
    chunk at a time, as fast as the disk reads them), else None: a ``.gz`` or
    remote file would cost a decompression or a download. An upper bound of
    the pairs read (blank and skipped lines are counted too)."""
    if any(is_gzip_name(name) or not os.path.isfile(name) for name in files):
        return None
    total = 0
    for name in files:
        last = b"\n"
        with open(name, "rb") as handle:
            while chunk := handle.read(_CHUNK):
                total += chunk.count(b"\n")
                last = chunk[-1:]
        total += last != b"\n"  # a last line without its line end
    return total


class Progress:
    """The job's lines on stdout (none unless ``verbose``).

    The rate is of this call's pairs after its first batch (which traces the
    search), so a resumed call's ETA holds from its second batch on.

    Args:
        out: the output file (named in each line).
        done: pairs done before this call.
        total: the pairs of the input (of the shard), or None: unknown.
        log_seconds: seconds between two progress lines (0: every batch).
        verbose: print.
    """

    def __init__(self, out, done, total, log_seconds, verbose):
        self.out = out
        self.resumed_at = done
        self.total = total
        self.log_seconds = log_seconds
        self.verbose = verbose
        self._first = None  # (time, pairs done) when the first batch ended
        self._last_line = time.monotonic()

    def _print(self, text):
        if self.verbose:
            print(f"{self.out}: {text}", flush=True)

    def started(self):
        if self.resumed_at:
            self._print(f"resuming after {self.resumed_at:,} pairs")
        else:
            self._print("translating" + self._of())

    def _of(self):
        return "" if self.total is None else f" {self.total:,} pairs"

    def batch_done(self, done):
        now = time.monotonic()
        if self._first is None:
            self._first = (now, done)
        if now - self._last_line < self.log_seconds:
            return
        self._last_line = now
        self._print(self.line(done, now))

    def rate(self, done, now):
        """Pairs per second since the first batch of this call, or None."""
        if self._first is None or now <= self._first[0] or done <= self._first[1]:
            return None
        return (done - self._first[1]) / (now - self._first[0])

    def line(self, done, now):
        """``N/T pairs  R pairs/s  ETA h:mm:ss`` (``N pairs  R pairs/s`` when
        the total is unknown; ``ETA --`` before a rate is known)."""
        rate = self.rate(done, now)
        speed = "" if rate is None else f"  {rate:,.1f} pairs/s"
        if self.total is None:
            return f"{done:,} pairs{speed}"
        eta = "--" if rate is None else clock(max(0, self.total - done) / rate)
        return f"{done:,}/{self.total:,} pairs{speed}  ETA {eta}"

    def finished(self, record):
        skipped = ""
        if record.skipped:
            skipped = f", {record.skipped:,} skipped ({skipped_path(self.out).name})"
        self._print(
            f"complete: {record.pairs_done:,} pairs, {record.written:,} lines "
            f"written{skipped}"
        )

    def interrupted(self, record):
        self._print(
            f"interrupted after {record.pairs_done:,} pairs ({record.written:,} "
            "lines written); the same call resumes from there"
        )
