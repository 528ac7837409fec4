"""TensorFlow's stderr, quieted: the command line hides TensorFlow's C++ log lines
unless ``--verbose`` or ``--debug`` is given, whatever ``TF_CPP_MIN_LOG_LEVEL`` says.

`quiet_tensorflow` is called once, after the argument checks and before a
command imports TensorFlow; `native_stderr_filtered` drops the lines
`NATIVE_LOG_LINE` matches from file descriptor 2 and keeps the rest.
"""

import contextlib
import os
import re
import sys
import tempfile

# TensorFlow's native log lines: absl's ("I0000 00:00:1796071465.895658 10740
# cudart_stub.cc:31] ..."), its pre-initialization notice, and TF's older format.
NATIVE_LOG_LINE = re.compile(
    r"^(WARNING: All log messages before absl::InitializeLog\(\) is called"
    r"|[IWEF]\d{4} \d\d:\d\d:\d+\.\d+ +\d+ [^ \]]+:\d+\]"
    r"|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: [IWEF] )"
)


@contextlib.contextmanager
def native_stderr_filtered():
    """Drops TensorFlow's native log lines written to fd 2 inside the block; keeps
    the rest.

    TensorFlow prints "Could not find cuda drivers" through absl before any
    log level applies, so ``TF_CPP_MIN_LOG_LEVEL`` alone cannot hide it.
    """
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            text = captured.read().decode("utf-8", "replace")
            for line in text.splitlines(keepends=True):
                if not NATIVE_LOG_LINE.match(line):
                    sys.stderr.write(line)
            sys.stderr.flush()


def quiet_tensorflow():
    """Silences TensorFlow's C++ logging, whatever ``TF_CPP_MIN_LOG_LEVEL`` the
    user set.

    Measured with TF 2.21: ``import tensorflow`` prints absl's "All log messages
    before absl::InitializeLog()" notice, the oneDNN line and "Could not find
    cuda drivers" (each twice) under every ``TF_CPP_MIN_LOG_LEVEL`` (unset, 0-3);
    ``GLOG_minloglevel``, ``ABSL_MIN_LOG_LEVEL`` or an empty ``CUDA_VISIBLE_DEVICES``
    hide none of them, ``TF_ENABLE_ONEDNN_OPTS=0`` only the oneDNN line (and
    changes the numerics). So fd 2 is filtered around the import, and the level
    is 3 for what TensorFlow logs later (a user's 0 would show "failed call to
    cuInit") and for the processes the command starts (they inherit it).
    ``--verbose`` leaves all of this alone.
    """
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
    if "tensorflow" not in sys.modules:
        with native_stderr_filtered():
            import tensorflow  # noqa: F401
