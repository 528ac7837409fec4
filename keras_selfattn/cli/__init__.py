"""The ``keras-selfattn`` command: a thin argparse layer over the library.

Every subcommand calls its job's documented function in `keras_selfattn.jobs`,
the one module holding every job (train, translate, evaluate, average, export,
check-serving, build-vocab, the demo).

The command line is a TensorFlow application: it sets ``KERAS_BACKEND=tensorflow``
before Keras loads and says so in one line when the user's configuration named
another backend, installed or not (`cli.commands.use_tensorflow`). The option
help comes from `cli.option_help` and, for the rest, the ``Attributes:``
sections of `ModelConfig` and `TrainConfig`.

``--help``, ``--version`` and usage errors answer before Keras loads: this
package and every module the parser reads import no Keras or TensorFlow, and the
console script (`keras_selfattn_command`) parses before it lets the package's
``__init__`` load Keras (`cli.parser`).

Never a traceback: bad input (a missing or unreadable file, a malformed TSV or
``config.json``, a bad option value) prints one line ``keras-selfattn: error: ...``
naming the file or argument and exits with status 2; anything else is reported in
one line as an internal error (exit status 70), and ``--debug`` shows its
traceback. A ``train`` whose model does not translate at its last validation
(the health check of `training.callbacks.health`) exits with status 3.
TensorFlow's C++ log lines are silenced unless ``--verbose`` or ``--debug`` is
given, whatever ``TF_CPP_MIN_LOG_LEVEL`` says.

The modules:

- `cli.parser`: the parser, built from Keras-free modules.
- `cli.commands`: `prepare` (parse, choose TensorFlow, check: no Keras yet),
  `main` and `run_program` (`main` as the console script and ``python -m`` run
  it). Parses and dispatches, no more.
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
