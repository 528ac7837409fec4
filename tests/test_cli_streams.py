"""translate's stopping signals: a batch being written is finished and counted
before the command stops, whichever thread the signal reaches."""

import io
import os
import signal

import pytest

from keras_selfattn.cli import streams
from keras_selfattn.cli.line_batches import CompleteLines
from keras_selfattn.stopping import Stopped, signals_stop


class _SignalledMidBatch(io.BytesIO):
    """A stream that receives a real signal while a batch is being written."""

    def __init__(self, signum):
        super().__init__()
        self.signum = signum

    def write(self, data):
        os.kill(os.getpid(), self.signum)
        return super().write(data)


@pytest.mark.parametrize(
    "signum, status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)]
)
def test_a_signal_during_a_batch_stops_after_it_counted(signum, status):
    out = _SignalledMidBatch(signum)
    sink = CompleteLines(out)
    with signals_stop(), pytest.raises(Stopped) as stopped:
        sink.write(["eins", "zwei"])
    assert stopped.value.exit_status == status == streams.exit_status(stopped.value)
    assert out.getvalue() == b"eins\nzwei\n" and sink.written == 2


def test_a_signal_between_batches_stops_at_once():
    with signals_stop(), pytest.raises(Stopped) as stopped:
        os.kill(os.getpid(), signal.SIGHUP)
        signal.pthread_sigmask(signal.SIG_SETMASK, [])  # a point where it is raised
    assert stopped.value.exit_status == 129
