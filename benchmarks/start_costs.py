"""What a short run's ``train`` and its ``export`` cost, each in a fresh process.

A short run is mostly start-up: importing TensorFlow, tracing the tf.data stages,
the train and validation steps and, for ``export``, the searches of the
signatures. This times the two commands (the command-line tests' small run: 40
steps of a width-16 model on 400 pairs, a validation every 5) as CPU seconds of
the child process (user + system, from ``getrusage``: on a shared machine the
CPU a process spends varies far less than its wall time), for this tree and,
with ``--before TREE``, another checkout (e.g. ``git archive REV | tar -x -C
TREE``), interleaved round by round. ``python -c "import tensorflow"`` is the
floor every command pays.

    .venv/bin/python benchmarks/start_costs.py [--rounds N] [--before TREE]
"""

import argparse
import os
import pathlib
import resource
import shutil
import subprocess
import sys
import tempfile

import _bench

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
# The command-line tests' small run and its pairs, as the tests write them.
from tests.bad_input_cases import SMALL_TRAIN, _pair_lines


def child_cpu_seconds(arguments, tree):
    """Runs ``python ARGUMENTS`` with ``tree`` first on the path; its CPU seconds."""
    env = dict(os.environ, PYTHONPATH=str(tree), TF_CPP_MIN_LOG_LEVEL="3")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(
        [sys.executable, *arguments],
        cwd=tree,
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def one_round(tree, work, pairs):
    """The train and export commands of a new run under ``work``; their CPU-s."""
    shutil.rmtree(work, ignore_errors=True)
    run, exports = work / "run", work / "exports"
    train = [
        "-m",
        "keras_selfattn",
        *SMALL_TRAIN,
        "--data",
        str(pairs),
        "--out",
        str(run),
    ]
    export = ["-m", "keras_selfattn", "export", "--model", str(run)]
    return {
        "train": child_cpu_seconds(train, tree),
        "export": child_cpu_seconds([*export, "--export-dir", str(exports)], tree),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--before", type=pathlib.Path, default=None)
    args = parser.parse_args(argv)
    trees = {"this tree": REPO}
    if args.before is not None:
        trees = {"before": args.before.resolve(), **trees}
    samples = {(tree, step): [] for tree in trees for step in ("train", "export")}
    floor = []
    with tempfile.TemporaryDirectory() as scratch:
        scratch = pathlib.Path(scratch)
        pairs = scratch / "pairs.tsv"
        pairs.write_bytes(_pair_lines(400))
        for r in range(args.rounds):
            order = list(trees) if r % 2 == 0 else list(trees)[::-1]
            for name in order:
                for step, seconds in one_round(
                    trees[name], scratch / "w", pairs
                ).items():
                    samples[name, step].append(seconds)
            floor.append(child_cpu_seconds(["-c", "import tensorflow"], REPO))
    print(
        "A short run's commands, each in a fresh process, CPU seconds (user + "
        "system), median of rounds:\n"
    )
    names = list(trees)
    header = ["command", *(f"{name}, CPU-s" for name in names)]
    if "before" in trees:
        header.append("this tree / before (median of rounds)")
    rows = []
    for step in ("train", "export"):
        row = [f"`keras-selfattn {step}`"]
        row += [f"{_bench.median(samples[name, step]):.1f}" for name in names]
        if "before" in trees:
            ratio = _bench.median(
                a / b
                for a, b in zip(samples["this tree", step], samples["before", step])
            )
            row.append(f"**{ratio:.2f}**")
        rows.append(row)
    rows.append(
        ['`python -c "import tensorflow"` (the floor)']
        + [f"{_bench.median(floor):.1f}"] * len(names)
        + ([""] if "before" in trees else [])
    )
    _bench.print_table(header, rows)
    print()
    print(f"median of {args.rounds} interleaved rounds; {_bench.environment_line()}")
    print(f"command: {_bench.command_line(__file__, argv)}")


if __name__ == "__main__":
    main()
