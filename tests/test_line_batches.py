"""Lines in batches as a filter reads them, and whole lines out."""

import io
import os
import re
import signal
import subprocess
import threading
import time

import pytest

from keras_selfattn.cli.line_batches import CompleteLines, LineBatches
from keras_selfattn.stopping import Stopped, signals_stop
from tests import forked_commands


def test_a_file_comes_in_full_batches_with_crlf_and_the_last_line_kept():
    stream = io.BytesIO(b"a\r\nb\nc\nd\ne")
    batches = list(LineBatches(stream, batch_size=2))
    assert batches == [["a", "b"], ["c", "d"], ["e"]]


def test_only_newline_splits_a_line():
    stream = io.BytesIO("x\fy\x1dz\u2028w\n".encode())
    assert list(LineBatches(stream, 8)) == [["x\fy\x1dz\u2028w"]]


def test_bytes_that_are_not_utf8_are_replaced_and_counted():
    lines = LineBatches(io.BytesIO(b"caf\xe9\nok\n\xff\xfe\n"), 10)
    assert list(lines) == [["caf\ufffd", "ok", "\ufffd\ufffd"]]
    assert (lines.lines, lines.not_utf8_lines) == (3, 2)


def test_a_closed_stdin_is_no_input():
    assert list(LineBatches(None, 4)) == []
    assert list(LineBatches(io.BytesIO(b""), 4)) == []


@pytest.mark.parametrize("size", [0, -1, 1.5, "2"])
def test_a_bad_batch_size_is_named(size):
    expected = f"batch_size must be a positive integer. Received: {size!r}"
    with pytest.raises(ValueError, match=re.escape(expected)):
        LineBatches(io.BytesIO(b""), size)


def test_one_line_on_an_open_pipe_is_a_batch_at_once():
    """A co-process writes a line and waits for its answer: the batch must not
    wait for more input (or for the end of it)."""
    read_fd, write_fd = os.pipe()
    with os.fdopen(read_fd, "rb", buffering=0) as reader:
        batches = iter(LineBatches(reader, batch_size=32))
        os.write(write_fd, b"first\n")
        got = {}
        thread = threading.Thread(target=lambda: got.update(batch=next(batches)))
        thread.start()
        thread.join(timeout=10)
        assert got.get("batch") == ["first"]
        os.write(write_fd, b"second\nthird\n")
        assert next(batches) == ["second", "third"]
        os.close(write_fd)
        assert list(batches) == []


def test_memory_is_bounded_by_the_batch():
    """A long input is read in batches: no batch is larger than asked."""
    data = b"".join(b"line %d\n" % i for i in range(10_000))
    sizes = [len(batch) for batch in LineBatches(io.BytesIO(data), 64)]
    assert max(sizes) == 64 and sum(sizes) == 10_000


def test_complete_lines_are_written_and_counted():
    out = io.BytesIO()
    writer = CompleteLines(out)
    writer.write(["eins", "zwei"])
    writer.write(["drei"])
    assert out.getvalue() == b"eins\nzwei\ndrei\n"
    assert writer.written == 3


class _SignalledFlush(io.BytesIO):
    """A stream whose flush receives a real stopping signal, sent by another
    thread to itself (Python runs the handler in the main thread all the same)."""

    def __init__(self, signum):
        super().__init__()
        self.signum = signum

    def flush(self):
        sender = threading.Thread(
            target=lambda: signal.pthread_kill(threading.get_ident(), self.signum)
        )
        sender.start()
        sender.join()
        time.sleep(0.01)  # bytecodes run: a handler not held would raise here


@pytest.mark.parametrize(
    "signum, status",
    [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)],
)
def test_a_batch_interrupted_in_its_write_is_counted_as_written(signum, status):
    """A stopping signal that reaches any thread during a write is raised after the
    batch is out and counted, so ``written`` says what the stream holds."""
    out = _SignalledFlush(signum)
    writer = CompleteLines(out)
    with signals_stop(), pytest.raises(Stopped) as stopped:
        writer.write(["eins", "zwei"])
    assert stopped.value.exit_status == status
    assert out.getvalue() == b"eins\nzwei\n"
    assert writer.written == 2


@pytest.mark.slow
def test_a_signal_during_a_write_waits_for_the_batch(tmp_path):
    """SIGTERM arriving while a batch is written is raised after it: the file
    holds whole batches only, and the process ends with the shell's status."""
    script = (
        "import sys\n"
        "from keras_selfattn.cli.line_batches import CompleteLines\n"
        "from keras_selfattn.stopping import Stopped, signals_stop\n"
        "out = open(sys.argv[1], 'wb')\n"
        "writer = CompleteLines(out)\n"
        "try:\n"
        "    with signals_stop():\n"
        "        print('ready', flush=True)\n"
        "        while True:\n"
        "            writer.write(['x' * 1000] * 200)\n"
        "except Stopped as stopped:\n"
        "    print(writer.written, flush=True)\n"
        "    sys.exit(stopped.exit_status)\n"
    )
    target = tmp_path / "out.txt"
    env = dict(os.environ, PYTHONPATH=os.getcwd())
    process = forked_commands.Popen(
        ["-c", script, str(target)], stdout=subprocess.PIPE, env=env
    )
    assert process.stdout.readline() == b"ready\n"
    time.sleep(0.3)
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=20) == 143
    written = int(process.stdout.read())
    data = target.read_bytes()
    assert data and data.endswith(b"\n")
    assert set(data.split(b"\n")[:-1]) == {b"x" * 1000}
    assert data.count(b"\n") == written and written % 200 == 0
