"""``keras-selfattn demo``: it takes the advice its own refusal gives
(``--overwrite``), hands its options to `jobs.run_demo` and ends with the result."""

import inspect
from types import SimpleNamespace

from keras_selfattn import jobs
from keras_selfattn.cli import build_parser
from keras_selfattn.jobs import run_demo
from keras_selfattn.training.resume import continuation
from tests.bad_input_cases import run_in_process


def test_demo_accepts_the_overwrite_its_refusal_advises():
    assert "--overwrite" in inspect.getsource(continuation)  # the advice given
    args = build_parser().parse_args(["demo", "--overwrite", "--out", "runs/x"])
    assert args.overwrite is True
    assert build_parser().parse_args(["demo"]).overwrite is False
    assert inspect.signature(run_demo).parameters["overwrite"].default is False


def test_demo_passes_its_options_on_and_ends_with_the_result(monkeypatch, tmp_path):
    """The command hands its options to `jobs.run_demo` and prints the run's
    test scores, then where the run is, as its last lines."""
    calls = []
    run = tmp_path / "demo"

    def run_demo(out, **options):
        calls.append((out, options))
        metrics = {
            "test": {
                "chrf": 61.234,
                "bleu": 40.5,
                "exact_match": 0.125,
                "count": 8,
                "beam_size": 1,
            }
        }
        return SimpleNamespace(run_dir=run), metrics

    monkeypatch.setattr(jobs, "run_demo", run_demo)
    argv = ["demo", "--out", str(run), "--epochs", "2", "--overwrite"]
    result = run_in_process([*argv, "--no-figures", "--quiet"])
    assert result.status == 0, result
    assert calls == [
        (
            str(run),
            {
                "epochs": 2,
                "overwrite": True,
                "verbose": 0,
                "figures": False,
                "check_details": False,
            },
        )
    ]
    assert result.stdout.splitlines() == [
        (
            "test split: chrF 61.23  BLEU 40.50  exact match 12.50%  (8 pairs, "
            f"greedy; {run}/metrics.json)"
        ),
        f"run directory: {run}",
    ]
