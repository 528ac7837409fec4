"""The ``keras-selfattn`` argument parser, built without Keras or TensorFlow.

`build_parser` declares every command and option; everything it reads (the
choices, the defaults, the configuration dataclasses and their docstrings, the
presets) lives in Keras-free modules of the package (`keras_selfattn.choices`,
`keras_selfattn.config`, `keras_selfattn.version`...), and each command's module
imports its job only when the command runs. So ``--help``, ``--version`` and a
usage error answer in a fraction of a second.

Importing any module of the package runs ``keras_selfattn/__init__``, which
loads Keras (so that every class is registered for ``load_model``, whatever the
import order). The console script (`keras_selfattn_command`, beside the
package) therefore makes the package's module without running its
``__init__``, imports this parser, parses, and runs the ``__init__`` only when a
command runs; ``python -m keras_selfattn`` imports the package (and Keras)
before its parser runs.
"""

import argparse

from keras_selfattn.cli import run_commands, serving_commands, text_commands
from keras_selfattn.cli.errors import Parser
from keras_selfattn.cli.flags import add_output_options, append_defaults
from keras_selfattn.version import installed_version

__all__ = ["build_parser"]

# Each command's ``add_<command>``, in the order --help lists them.
COMMANDS = (
    run_commands.add_demo,
    run_commands.add_build_vocab,
    run_commands.add_train,
    text_commands.add_evaluate,
    text_commands.add_translate,
    text_commands.add_distill_data,
    text_commands.add_merge_shards,
    run_commands.add_average,
    run_commands.add_shortlist,
    serving_commands.add_export,
    serving_commands.add_check_serving,
)


class _VersionAction(argparse.Action):
    """--version: prints ``keras-selfattn VERSION`` (`installed_version`, read
    when asked) and exits."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest, nargs=0, default=dest, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"{parser.prog} {installed_version()}")
        parser.exit()


def build_parser():
    """The ``keras-selfattn`` argument parser (imports no Keras or TensorFlow)."""
    parser = Parser(
        prog="keras-selfattn",
        description="Attention seq2seq with Keras 3: train, evaluate, translate, "
        "export for TF Serving.",
    )
    parser.add_argument(
        "--version", action=_VersionAction, help="print the version and exit"
    )
    add_output_options(parser, default=False)
    subparsers = parser.add_subparsers(dest="command", required=True)
    for add in COMMANDS:
        add(subparsers)
    append_defaults(parser)
    return parser
