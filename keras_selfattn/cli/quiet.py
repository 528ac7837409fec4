"""TensorFlow's stderr, quieted: the command line hides TensorFlow's C++ log lines
unless ``--verbose`` or ``--debug`` is given, whatever ``TF_CPP_MIN_LOG_LEVEL`` says.

`quiet_tensorflow` is called once, after the argument checks; the package's
import already dropped TensorFlow's import lines for the command line
(`keras_selfattn.backends.import_keras`). `native_stderr_filtered` drops the
lines `NATIVE_LOG_LINE` matches from file descriptor 2 and keeps the rest.
"""

import os
import sys

from keras_selfattn.backends import NATIVE_LOG_LINE, native_stderr_filtered

__all__ = ["NATIVE_LOG_LINE", "native_stderr_filtered", "quiet_tensorflow"]


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
