"""``train --no-figures`` and ``demo --no-figures``: the final report writes the
test metrics and no figures; a run that would draw figures without matplotlib
installed is refused before it trains."""

import argparse
import importlib
import importlib.util
import json
import sys

import pytest

from keras_selfattn import jobs, training
from keras_selfattn.cli import build_parser
from tests.bad_input_cases import (
    CLEAR,
    TINY_RUN_ARGS,
    TINY_RUN_WITH_FIGURES,
    Case,
    classify,
    run_in_process,
)
from tests.training import reference_run

COMMANDS = {
    "train": ["train", "--data", "pairs.tsv", "--out", "run"],
    "demo": ["demo", "--out", "run"],
}


def test_the_tiny_runs_of_the_tests_draw_no_figures():
    assert TINY_RUN_ARGS == [*TINY_RUN_WITH_FIGURES, "--no-figures"]
    assert "--no-figures" not in TINY_RUN_WITH_FIGURES


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_no_figures_is_a_switch_whose_help_says_what_it_leaves_out(command):
    parser = build_parser()
    argv = COMMANDS[command]
    assert parser.parse_args(argv).figures is True
    assert parser.parse_args([*argv, "--no-figures"]).figures is False
    subparsers = next(
        a for a in parser._actions if isinstance(a, argparse._SubParsersAction)
    )
    (action,) = [
        action
        for action in subparsers.choices[command]._actions
        if "--no-figures" in action.option_strings
    ]
    help_text = " ".join(action.help.split())
    assert "metrics" in help_text and "RUN_DIR/plots" in help_text
    assert "matplotlib" in help_text and "default" not in help_text


@pytest.fixture
def no_matplotlib(monkeypatch):
    """matplotlib not installed, as Python sees it (None in sys.modules refuses the
    import and `importlib.util.find_spec` finds nothing)."""
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(ImportError):
        importlib.import_module("matplotlib")
    assert importlib.util.find_spec("matplotlib") is None


@pytest.fixture
def stub_training(monkeypatch):
    """`training.train` that trains nothing: it calls ``on_finished`` with a stand-in
    result (`jobs.report` records its keywords) and fails with a marker error."""
    reports = []

    def train(*args, on_finished=None, **options):
        on_finished("finished run")
        raise ValueError("stub training reached")

    def report(result, **options):
        reports.append((result, options))
        return {}

    monkeypatch.setattr(training, "train", train)
    monkeypatch.setattr(jobs, "report", report)
    return reports


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_figures_without_matplotlib_are_refused_before_training(
    command, no_matplotlib, stub_training, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pairs.tsv").write_text("un\tone\n")
    argv = COMMANDS[command]
    result = run_in_process(argv)
    case = Case(
        f"{command} without matplotlib",
        None,
        mentions=("--no-figures", "pip install 'keras-selfattn[plots]'"),
    )
    assert classify(case, argv, result) == CLEAR, result
    assert result.stderr.count("\n") == 1, result.stderr
    assert "figures" in result.stderr and "matplotlib" in result.stderr
    assert stub_training == [] and not (tmp_path / "run").exists()


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_no_figures_without_matplotlib_trains_and_reports_without_figures(
    command, no_matplotlib, stub_training, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pairs.tsv").write_text("un\tone\n")
    result = run_in_process([*COMMANDS[command], "--no-figures"])
    assert result.status == 2, result
    assert result.stderr.strip().endswith("stub training reached"), result.stderr
    assert stub_training == [("finished run", {"figures": False})]


def test_figures_are_drawn_by_default(stub_training, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pairs.tsv").write_text("un\tone\n")
    result = run_in_process(COMMANDS["train"])
    assert result.stderr.strip().endswith("stub training reached"), result.stderr
    assert stub_training == [("finished run", {"figures": True})]


@pytest.mark.slow
def test_a_run_without_figures_writes_its_metrics_and_never_imports_matplotlib(
    tmp_path_factory,
):
    """``train --epochs 1`` with TINY_RUN_ARGS in a fresh process (the run
    test_concurrent_trains.py races a second train against)."""
    shared = reference_run.no_figures_run(tmp_path_factory)
    run = shared.root / "run"
    assert shared.status == 0, shared.stderr[-3000:]
    assert shared.imported == "matplotlib imported: False", shared.stderr[-2000:]
    assert "exact match" in shared.stdout
    assert f"run directory: {run}" in shared.stdout
    metrics = json.loads((run / "metrics.json").read_text())
    assert {"bleu", "chrf", "exact_match"} <= set(metrics["test"])
    assert not (run / "plots").exists()
    assert json.loads((run / "training.json").read_text())["steps"] > 0
