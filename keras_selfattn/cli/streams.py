"""`translate` as a filter: where its lines come from and go, and how it stops.

Lines come from ``--input FILE``, the sentences given as arguments, or stdin (a
closed stdin is an empty input); answers go to ``--output FILE`` or stdout, a
batch at a time, whole and flushed (`cli.line_batches`). Ctrl-C, SIGTERM and
SIGHUP stop the command (`stopping.Stopped`) once the batch being written is
out: the exit status is the shell's 128 + the signal's number, and one line says
how many lines were written where.
Imports no Keras or TensorFlow.
"""

import os
import sys

from keras_selfattn.cli import errors
from keras_selfattn.cli.line_batches import CompleteLines, LineBatches

# Lines translated together: a batch goes out when full, or at once when no more
# input is waiting (one line on an open pipe is answered alone).
STREAM_BATCH = 64


def exit_status(interrupt):
    """130 for Ctrl-C, 143 for SIGTERM, 129 for SIGHUP."""
    return getattr(interrupt, "exit_status", errors.INTERRUPTED)


class Lines:
    """The source lines and the answers' writer of one `translate`.

    Attributes:
        batches: the source lines in batches (`LineBatches`, or the arguments').
        sink: the `CompleteLines` writing the answers (`open_output`).
        source_name: where the lines come from ("stdin", the --input file...).
        output_name: where the answers go ("stdout" or the --output file).
    """

    def __init__(self, args, stack):
        self.output_name = args.output or "stdout"
        self.source_name = args.input or "stdin"
        self.sink = None
        self._read = None
        if args.text:
            self.source_name = "the arguments"
            self.batches = _in_batches(args.text, STREAM_BATCH)
        else:
            self._read = LineBatches(_source(args, stack), STREAM_BATCH)
            self.batches = self._read

    def open_output(self, args, stack):
        """Opens where the answers go (after the source: a missing --input file
        leaves no empty --output behind)."""
        self.sink = CompleteLines(_output(args, stack))

    def written(self):
        """How many answers are written (0 before the output is open)."""
        return 0 if self.sink is None else self.sink.written

    def not_utf8_report(self):
        """What to say about the lines that were not UTF-8, or None."""
        from keras_selfattn.text.pair_line import NOT_UTF8  # text/ loads TF

        if self._read is None or not self._read.not_utf8_lines:
            return None
        return (
            f"{self.source_name}: {self._read.not_utf8_lines} of "
            f"{self._read.lines} lines {NOT_UTF8}; their undecodable bytes were "
            "read as U+FFFD"
        )


def _in_batches(texts, size):
    return [texts[start : start + size] for start in range(0, len(texts), size)]


def _source(args, stack):
    """The binary stream the lines are read from; None for a closed stdin."""
    if args.input:
        return stack.enter_context(open(args.input, "rb"))
    if sys.stdin is None:
        return None
    return sys.stdin.buffer


def _output(args, stack):
    """The binary stream the answers go to, its failures named."""
    if args.output:
        stream = stack.enter_context(open(args.output, "wb"))  # noqa: SIM115
        return errors.GuardedStream(stream, args.output)
    stdout = sys.stdout
    stdout.flush()
    binary = getattr(stdout, "buffer", None)
    return errors.GuardedStream(binary or _TextStream(stdout), "stdout")


class _TextStream:
    """Bytes written to a text stream with no binary buffer (a StringIO that
    stands for stdout), as UTF-8 text."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, data):
        return self._stream.write(data.decode("utf-8"))

    def flush(self):
        return self._stream.flush()


def check_sources(args):
    """Refuses sentences and --input together; warns about a sentence that names
    an existing file (the text is translated, not the file)."""
    if args.input and args.text:
        raise ValueError(
            "translate reads sentences given as arguments or --input FILE, not "
            f"both. Received: --input {args.input} and {len(args.text)} sentences"
        )
    for sentence in args.text:
        if sentence and os.path.isfile(sentence):
            warn(
                f"{sentence!r} is a file name: translating the text; to translate "
                f"the file, use --input {sentence}"
            )


def hint_on_a_terminal(args):
    """On a terminal, says how the typed input ends."""
    if args.text or args.input or sys.stdin is None:
        return
    try:
        typing = sys.stdin.isatty()
    except (OSError, ValueError):
        return
    if typing:
        warn(
            "translating each line you type; end the input with Ctrl-D",
            kind="note",
        )


def warn(message, kind="warning"):
    """One line on stderr: ``keras-selfattn: warning: ...``."""
    print(f"keras-selfattn: {kind}: {message}", file=sys.stderr, flush=True)
