"""What every ``keras-selfattn`` command shares: its parser, its translator.

Each command is a function pair in the module of its kind (`cli.run_commands`:
demo, build-vocab, train, average; `cli.text_commands`: evaluate, translate;
`cli.serving_commands`: export, check-serving): ``add_<command>(subparsers)``
declares it with `add_command`, which binds ``_<command>(args)``, the function
that calls the job in `keras_selfattn.jobs` and returns the exit status.
"""

import argparse

from keras_selfattn.cli import errors
from keras_selfattn.cli.flags import add_output_options


def add_command(subparsers, name, run, **kwargs):
    """A command's parser, with the output options; ``run(args)`` runs it. Its
    --help opens with what it does: its ``description``, by default its line in
    the list of commands (``help``)."""
    summary = kwargs["help"]
    first = summary.split()[0]
    if first.islower():  # "chrF" stays as it is written
        summary = first.capitalize() + summary[len(first) :]
    kwargs.setdefault("description", summary + ".")
    parser = subparsers.add_parser(name, **kwargs)
    add_output_options(parser, default=argparse.SUPPRESS)
    parser.set_defaults(run=run)
    return parser


def progress(args):
    """`train`'s verbose: nothing with --quiet, else what `fit_verbosity` chooses
    for ``"auto"`` (a progress bar on a terminal, progress lines otherwise)."""
    from keras_selfattn.training.callbacks.progress import fit_verbosity

    return fit_verbosity(0 if args.quiet else "auto")


def load_translator(args):
    """The `inference.Translator` of the run directory ``--model``, searching
    with the command's settings (``args.settings``, `cli.search_options`)."""
    from keras_selfattn.inference import load_translator

    with errors.opening_run(args.model):
        return load_translator(args.model, args.settings)
