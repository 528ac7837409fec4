"""How fast ``keras-selfattn --help`` answers in a fresh process.

Each sample starts a new interpreter running the console script's module
(``python -m keras_selfattn_command``, what the installed ``keras-selfattn``
runs), as a user typing the command does. The peers, timed interleaved in the
same run: ``python -c pass`` (the interpreter alone) and ``python -c "import
tensorflow"`` (what a command that loaded Keras would pay at least); with
``--before TREE`` also the same commands run from another checkout (e.g.
``git archive REV keras_selfattn keras_selfattn_command.py | tar -x -C TREE``).

    .venv/bin/python benchmarks/cli_startup.py [--rounds N] [--before TREE]
"""

import argparse
import os
import pathlib
import subprocess
import sys

import _bench

REPO = pathlib.Path(__file__).resolve().parents[1]
SCRIPT = ["-m", "keras_selfattn_command"]  # the installed keras-selfattn's module
COMMANDS = {
    "keras-selfattn --help": [*SCRIPT, "--help"],
    "keras-selfattn train --help": [*SCRIPT, "train", "--help"],
    "keras-selfattn train --epochs 0 (usage error)": [
        *SCRIPT,
        "train",
        "--data",
        "x.tsv",
        "--out",
        "run",
        "--epochs",
        "0",
    ],
}


def _runner(arguments, tree):
    env = dict(os.environ, PYTHONPATH=str(tree))

    def run():
        subprocess.run(  # in the tree: ``-m`` puts the working directory first
            [sys.executable, *arguments],
            env=env,
            cwd=tree,
            capture_output=True,
            check=False,
            timeout=300,
        )

    return run


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--before", default=None, help="another checkout to compare")
    parser.add_argument(
        "--quick", action="store_true", help="1 round, no warm-up, --help only"
    )
    args = parser.parse_args(argv)
    rounds = 1 if args.quick else args.rounds
    commands = list(COMMANDS.items())[:1] if args.quick else COMMANDS.items()

    functions = {
        "python -c pass": _runner(["-c", "pass"], REPO),
        "python -c 'import tensorflow'": _runner(["-c", "import tensorflow"], REPO),
    }
    for name, arguments in commands:
        functions[name] = _runner(arguments, REPO)
        if args.before:
            functions[f"{name} [before]"] = _runner(arguments, args.before)
    samples = _bench.interleaved(functions, rounds, warmup=0 if args.quick else 1)

    reference = "python -c 'import tensorflow'"
    rows = [
        (
            name,
            f"{_bench.median(times):.2f}",
            f"{_bench.paired_ratio(samples, name, reference):.2f}",
        )
        for name, times in samples.items()
    ]
    _bench.print_table(
        ["command (fresh process)", "median s", "ratio to import tensorflow"], rows
    )
    print()
    print(f"`{_bench.command_line(__file__, argv)}`, {rounds} rounds")
    print(_bench.environment_line())


if __name__ == "__main__":
    main()
