"""The suite's time by kind of cost and by file, read from a pytest log.

Reads the ``--durations=0`` lines of a log (``./run.sh test --durations=0 >
LOG``) and prints two Markdown tables: test-seconds (the wall time of each
test's setup, call and teardown on its worker) per kind of cost, and the
heaviest files. A kind is assigned by file (`KINDS`, first match): what
docs/development.md's census shows.

    .venv/bin/python scripts/suite_census_by_kind.py LOG [--files 12]
"""

import argparse
import collections
import re
import sys

# (kind, the path prefixes of its test files), first match wins.
KINDS = (
    ("the JAX run (one test)", ("tests/test_jax_backend.py",)),
    (
        "benchmarks' quick modes",
        (
            "tests/test_benchmarks.py",
            "tests/test_accelerator_benchmark.py",
            "tests/test_bench_interleaving.py",
        ),
    ),
    ("exports and serving", ("tests/serving/",)),
    (
        "processes: signals, start-up, distribution",
        (
            "tests/training/test_multi_worker.py",
            "tests/training/test_mirrored.py",
            "tests/training/test_distributed.py",
            "tests/training/test_train_signals.py",
            "tests/test_console_script.py",
            "tests/test_stopping.py",
            "tests/test_forked_commands.py",
            "tests/test_quiet_tensorflow.py",
            "tests/test_backends.py",
            "tests/test_registrations.py",
            "tests/test_installed_types.py",
            "tests/test_import_side_effects.py",
            "tests/test_health_exit.py",
            "tests/test_cli_streams.py",
        ),
    ),
    (
        "lint-like checks",
        (
            "tests/test_code_shape.py",
            "tests/test_help_truth.py",
            "tests/test_api_reference.py",
            "tests/test_typing.py",
            "tests/test_packaging.py",
            "tests/test_results_reference.py",
            "tests/test_import_graph.py",
            "tests/test_suite_census.py",
            "tests/layers/test_docstrings.py",
            "tests/text/test_docstrings.py",
            "tests/serving/test_docstrings.py",
        ),
    ),
    (
        "trainings (train, resume, the command line on a run)",
        (
            "tests/training/",
            "tests/test_cli",
            "tests/test_train_interrupted.py",
            "tests/test_no_figures.py",
            "tests/test_examples.py",
            "tests/test_demo_options.py",
            "tests/test_distillation.py",
            "tests/test_evaluate.py",
            "tests/test_plotting.py",
        ),
    ),
    (
        "text and data",
        ("tests/text/", "tests/run_directory/", "tests/test_build_vocab"),
    ),
    ("models, layers, searches in this process", ("tests/",)),
)
LINE = re.compile(r"^(\d+\.\d+)s (?:setup|call|teardown) +(\S+?)(?:::|$)")


def kind_of(path):
    """The kind of the test file ``path`` (`KINDS`)."""
    for kind, prefixes in KINDS:
        if path.startswith(prefixes):
            return kind
    return "other"


def read(log):
    """``{test file: test-seconds}`` and ``{test file: node ids}`` of ``log``."""
    seconds, tests = collections.Counter(), collections.defaultdict(set)
    for line in log:
        found = LINE.match(line)
        if found:
            path = found.group(2)
            seconds[path] += float(found.group(1))
            tests[path].add(line.split(maxsplit=2)[2].strip())
    return seconds, tests


def tables(seconds, tests, files):
    """The two Markdown tables, as lines."""
    by_kind = collections.Counter()
    counted = collections.Counter()
    for path, value in seconds.items():
        by_kind[kind_of(path)] += value
        counted[kind_of(path)] += len(tests[path])
    lines = ["| kind | tests timed | test-s |", "|---|---:|---:|"]
    for kind, value in by_kind.most_common():
        lines.append(f"| {kind} | {counted[kind]} | {value:,.0f} |")
    total = sum(seconds.values())
    lines += [f"| all | {sum(counted.values())} | {total:,.0f} |", ""]
    lines += ["| file | test-s |", "|---|---:|"]
    lines += [f"| `{p}` | {v:,.1f} |" for p, v in seconds.most_common(files)]
    return lines


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log", help="a pytest log with --durations=0 lines")
    parser.add_argument("--files", type=int, default=12, help="heaviest files shown")
    args = parser.parse_args(argv)
    with open(args.log, encoding="utf-8") as log:
        seconds, tests = read(log)
    if not seconds:
        parser.error(f"no --durations lines in {args.log}")
    print("\n".join(tables(seconds, tests, args.files)))


if __name__ == "__main__":
    sys.exit(main())
