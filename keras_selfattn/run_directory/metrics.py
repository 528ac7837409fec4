"""A run's test-split scores, ``metrics.json``."""

import json
import pathlib

from keras_selfattn.run_directory.atomic import write_text_atomically
from keras_selfattn.run_directory.layout import METRICS_FILE


def write_metrics(run_dir, metrics):
    """Writes ``metrics.json`` (the test-split scores) in the run directory,
    atomically."""
    return write_text_atomically(
        pathlib.Path(run_dir) / METRICS_FILE,
        json.dumps(metrics, indent=2, sort_keys=True) + "\n",
    )
