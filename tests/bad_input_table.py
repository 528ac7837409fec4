"""Writes the table of bad-input and fault cases into tests/README.md.

Runs every case of `tests.bad_input_cases.CASES` (the list the tests assert on)
in a fresh ``python -m keras_selfattn`` process, as a user meets it (a crash
shows as a signal there), after training one tiny run for the cases that need
it; classifies each outcome and writes the table between the markers of
tests/README.md. ``--in-process`` runs the cases in this process instead, as the
tests do (faster: one TensorFlow import; a crash would end the script).

    PYTHONPATH=. .venv/bin/python tests/bad_input_table.py [--in-process]
"""

import argparse
import collections
import os
import pathlib
import sys
import tempfile

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.bad_input_cases import (  # after the path is set
    CASES,
    OUTCOMES,
    TINY_RUN_ARGS,
    Workspace,
    run_case,
    run_in_process,
    run_in_subprocess,
)

README = REPO / "tests" / "README.md"
BEGIN, END = "<!-- bad-input-table -->", "<!-- /bad-input-table -->"


def _subprocess_runner(tree):
    env = dict(os.environ, PYTHONPATH=str(tree))
    env.pop("TF_CPP_MIN_LOG_LEVEL", None)
    return lambda argv, stdin=b"", stdout=None: run_in_subprocess(
        argv, stdin, env=env, stdout=stdout
    )


def _train_tiny_run(root):
    from keras_selfattn import text

    data = text.write_pairs(root / "pairs.tsv", text.load_bundled_dates()[:300])
    run = root / "run"
    argv = ["train", "--data", str(data), "--out", str(run), "--epochs", "1"]
    result = _subprocess_runner(REPO)([*argv, *TINY_RUN_ARGS])
    if result.status != 0:
        sys.exit(f"training the tiny run failed:\n{result.stderr[-3000:]}")
    return run


def _summary(outcomes):
    counts = collections.Counter(outcomes)
    return ", ".join(f"{counts[o]} {o}" for o in OUTCOMES if counts[o])


def _write_section(text):
    old = README.read_text(encoding="utf-8") if README.exists() else ""
    if BEGIN in old and END in old:
        head, rest = old.split(BEGIN, 1)
        new = head + BEGIN + "\n" + text + END + rest.split(END, 1)[1]
    else:
        new = old + ("\n" if old else "") + BEGIN + "\n" + text + END + "\n"
    temporary = README.with_name(f".{README.name}.tmp")
    temporary.write_text(new, encoding="utf-8")
    os.replace(temporary, README)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--in-process", action="store_true", help="no subprocesses")
    args = parser.parse_args(argv)
    runner = run_in_process if args.in_process else _subprocess_runner(REPO)

    rows, outcomes = [], []
    with tempfile.TemporaryDirectory(prefix="bad-input-") as scratch:
        root = pathlib.Path(scratch)
        run = _train_tiny_run(root)
        for number, case in enumerate(CASES, 1):
            workspace = Workspace(root / f"case{number}", run=run)
            workspace.root.mkdir()
            outcome, _, result = run_case(case, workspace, runner)
            outcomes.append(outcome)
            print(f"{case.name}: {outcome}", file=sys.stderr, flush=True)
            last = (result.stderr.strip().splitlines() or [""])[-1]
            shown = last if result.status != 0 else f"exit 0: {result.stdout[:60]!r}"
            if outcome == "skipped":
                shown = f"(not run: {last})"
            shown = shown.replace(str(root), "$TMP").replace("|", "\\|")[:160]
            rows.append((number, case.name, case.expect, outcome, f"`{shown}`"))

    command = "PYTHONPATH=. .venv/bin/python tests/bad_input_table.py"
    how = "in-process" if args.in_process else "each case in a fresh process"
    produced = (
        f"Produced by `{command}{' --in-process' if args.in_process else ''}` "
        f"({how}); the same cases are asserted by `tests/test_cli_bad_input.py` "
        "and `tests/test_cli.py`."
    )
    lines = [
        produced,
        "",
        f"{len(CASES)} cases: {_summary(outcomes)}.",
        "",
        "| # | case | expected | outcome | what the user sees |",
        "|---|---|---|---|---|",
        *["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows],
        "",
    ]
    _write_section("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
