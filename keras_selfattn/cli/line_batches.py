"""Lines in, lines out, as a filter does: read in batches, answer each batch at once.

`LineBatches` reads a binary stream (stdin, a pipe, a file) and yields its lines in
batches of at most ``batch_size``: a batch goes out when it is full, or as soon as no
more input is waiting, so one line written to an open pipe is answered without
waiting for the end of the input. Memory is bounded by the batch, not the input.
Lines are split on "\\n" only (a sentence may hold \\f, \\x1d or U+2028); a final
"\\r" is dropped (CRLF files); bytes that are not UTF-8 become U+FFFD and the lines
that held them are counted (`not_utf8_lines`), so that the caller can say so.

`CompleteLines` writes a batch of answers under `stopping.held`: a stopping
signal (Ctrl-C, SIGTERM, SIGHUP, inside `stopping.signals_stop`) waits until the
batch is written and flushed, whichever thread it reached, so every line written is
whole and in order, and `written` says how many there are.
"""

import io
import os
import select

from keras_selfattn.stopping import held

_CHUNK = 1 << 16


class LineBatches:
    """The lines of ``stream`` in batches (lists of str) of at most ``batch_size``.

    Args:
        stream: a binary file object (``sys.stdin.buffer``, ``open(path, "rb")``).
            None (stdin closed) reads as no lines.
        batch_size: the most lines a batch holds (a positive int).

    Attributes:
        lines: the lines read so far.
        not_utf8_lines: how many of them held bytes that are not UTF-8.
    """

    def __init__(self, stream, batch_size):
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(
                f"batch_size must be a positive integer. Received: {batch_size!r}"
            )
        self.batch_size = batch_size
        self.lines = 0
        self.not_utf8_lines = 0
        self._stream = stream
        self._fd = _file_descriptor(stream)

    def __iter__(self):
        if self._stream is None:
            return
        pending, batch, ended = b"", [], False
        while True:
            while len(batch) < self.batch_size and b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                batch.append(self._decoded(line))
            if ended and pending and len(batch) < self.batch_size:
                batch.append(self._decoded(pending))  # a last line without "\n"
                pending = b""
            full = len(batch) == self.batch_size
            if batch and (full or ended or not self._input_waiting()):
                yield batch
                batch = []
                continue
            if ended:
                return
            chunk = self._read()
            ended = not chunk
            pending += chunk

    def _decoded(self, raw):
        self.lines += 1
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            self.not_utf8_lines += 1
            text = raw.decode("utf-8", errors="replace")
        return text.removesuffix("\r")

    def _read(self):
        if self._fd is not None:
            return os.read(self._fd, _CHUNK)
        return self._stream.read1(_CHUNK)

    def _input_waiting(self):
        """Whether more input can be read at once (a file: always)."""
        if self._fd is None:
            return True
        readable, _, _ = select.select([self._fd], [], [], 0)
        return bool(readable)


def _file_descriptor(stream):
    """``stream``'s file descriptor, or None for an in-memory stream."""
    if stream is None:
        return None
    try:
        return stream.fileno()
    except (AttributeError, OSError, io.UnsupportedOperation):
        return None


class CompleteLines:
    """Writes batches of lines to a binary stream, each batch whole and flushed
    before a stopping signal is raised (`stopping.held`; the signal is raised as
    `stopping.Stopped` inside `stopping.signals_stop`).

    Attributes:
        written: the lines written so far.
    """

    def __init__(self, stream):
        self._stream = stream
        self.written = 0

    def write(self, lines):
        """Writes ``lines`` (str, without their "\\n") and flushes; a stopping
        signal that arrives meanwhile is raised once they are out and counted."""
        data = "".join(f"{line}\n" for line in lines).encode("utf-8")
        with held():
            self._stream.write(data)
            self._stream.flush()
            self.written += len(lines)
