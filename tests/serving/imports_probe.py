"""Runs ``keras-selfattn ARGS`` (argv[1:]) as the console script does, then prints
on stderr whether matplotlib was imported: ``matplotlib imported: True|False``.

With ``--each JSON`` (a list of argument lists) it runs the commands one after the
other in this process and prints, after each, ``exit <status> matplotlib imported:
True|False``: imports only accumulate, so a command that imports matplotlib shows
it in its own line, whatever ran before it. The command's ``os._exit`` (the end of
`keras_selfattn.cli.commands.run_program`) is a SystemExit here.
"""

import json
import os
import runpy
import sys


def _exit_returns(status):
    """In place of ``os._exit``, which the console script ends a command with:
    this process runs on (several commands, then its own line)."""
    raise SystemExit(status)


os._exit = _exit_returns


def run(args):
    """``keras-selfattn ARGS`` as the console script runs it; its exit status."""
    # argv[0] as the console script's: the command line's own start-up path.
    sys.argv = ["keras-selfattn", *args]
    try:
        runpy.run_module("keras_selfattn", run_name="__main__")
    except SystemExit as exited:
        return exited.code
    return 0


if sys.argv[1:2] == ["--each"]:
    for args in json.loads(sys.argv[2]):
        status = run(args)
        print(
            f"exit {status} matplotlib imported: {'matplotlib' in sys.modules}",
            file=sys.__stderr__,
            flush=True,
        )
else:
    sys.argv = ["keras-selfattn", *sys.argv[1:]]
    try:
        runpy.run_module("keras_selfattn", run_name="__main__")
    finally:
        print(
            f"matplotlib imported: {'matplotlib' in sys.modules}", file=sys.__stderr__
        )
