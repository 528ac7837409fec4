"""The ``keras-selfattn`` command: a thin argparse layer over the library.

Every subcommand calls its job's documented function in `keras_selfattn.jobs`,
the one module holding every job (train, translate, evaluate, average, export,
check-serving, build-vocab, the demo).

The command line is a TensorFlow application: when Keras was loaded with another
backend (``KERAS_BACKEND``), it says so in one line and runs itself again under
TensorFlow (`cli.commands.run_on_tensorflow`). The option help comes from the
``Attributes:`` sections of `ModelConfig` and `TrainConfig`.

Never a traceback: bad input (a missing or unreadable file, a malformed TSV or
``config.json``, a bad option value) prints one line ``keras-selfattn: error: ...``
naming the file or argument and exits with status 2; anything else is reported in
one line as an internal error (exit status 70), and ``--debug`` shows its
traceback. A ``train`` whose model does not translate at its last validation
(the health check of `training.callbacks.health`) exits with status 3.
TensorFlow's C++ log lines are silenced unless ``--verbose`` or ``--debug`` is
given, whatever ``TF_CPP_MIN_LOG_LEVEL`` says.

The modules:

- `cli.commands`: the parser, `main` and `run_program` (`main` as the console
  script and ``python -m`` run it). Parses and dispatches, no more.
- `cli.run_commands` (demo, build-vocab, train, average), `cli.text_commands`
  (evaluate, translate), `cli.serving_commands` (export, check-serving): one
  function pair per command (``add_<command>`` declares it, ``_<command>`` runs
  it); `cli.command` what they share.
- `cli.flags`: the flags generated from the config dataclasses, the options
  several commands share, each option's "(default: ...)".
- `cli.errors`: the error policy: one line and an exit status for each failure.
- `cli.checks`: the argument checks that run before TensorFlow loads.
- `cli.quiet`: TensorFlow's native log lines kept off stderr.
"""

from keras_selfattn.cli.commands import build_parser, main, run_program
from keras_selfattn.cli.errors import (
    EXIT_NOT_TRANSLATING,
    INTERNAL_ERROR,
    INTERRUPTED,
    USAGE_ERROR,
)
from keras_selfattn.cli.quiet import NATIVE_LOG_LINE
from keras_selfattn.config import ModelConfig, TrainConfig
from keras_selfattn.config.presets import PRESETS, preset_configs

__all__ = [
    "EXIT_NOT_TRANSLATING",
    "INTERNAL_ERROR",
    "INTERRUPTED",
    "NATIVE_LOG_LINE",
    "PRESETS",
    "USAGE_ERROR",
    "ModelConfig",
    "TrainConfig",
    "build_parser",
    "main",
    "preset_configs",
    "run_program",
]
