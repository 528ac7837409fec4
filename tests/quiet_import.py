"""Imports with TensorFlow's native log lines dropped from fd 2.

absl prints them ("Could not find cuda drivers", the oneDNN notice) before any log
level applies; from an xdist worker they would land after pytest's summary, and
from the forking server (`tests.forked_commands`) beside a test's output. Every
other line written to fd 2 meanwhile is written again.
"""

import importlib
import os
import sys
import tempfile


def import_quietly(*names):
    """Imports the modules ``names`` (the first imports TensorFlow)."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            for name in names:
                importlib.import_module(name)
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
        from keras_selfattn.backends import NATIVE_LOG_LINE

        captured.seek(0)
        for line in captured.read().decode("utf-8", "replace").splitlines(True):
            if not NATIVE_LOG_LINE.match(line):
                sys.stderr.write(line)
        sys.stderr.flush()
