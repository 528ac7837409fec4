"""The finished runs tests share, each trained once per test run (one worker
trains it, the others read it) and never changed by a test: the 12-step tiny
run that tests/training/test_train.py and test_continuation.py compare against,
the command line's tiny run that tests/test_cli.py reads and
test_continuation.py continues a copy of, and the tiny run without figures that
tests/test_no_figures.py and tests/training/test_concurrent_trains.py read."""

import os
import pathlib
import shutil
import subprocess
import sys
import time
import types
import warnings

from keras_selfattn import text
from keras_selfattn.config import ModelConfig, TrainConfig
from tests.training.cluster import REPO, once_per_test_run

TINY_MODEL = ModelConfig(
    num_hiddens=16,
    num_heads=2,
    num_layers=1,
    ffn_hiddens=32,
    decoder_units=16,
    embedding_dim=8,
    dropout=0.2,  # on: a resumed run must draw the same dropout masks
    max_source_len=24,
    max_target_len=12,
)


def tiny_train_config(**overrides):
    # XLA is covered by tests/models and the CLI tests; here compiling would dominate.
    values = {
        "batch_size": 16,
        "source_tokenizer": "word",
        "target_tokenizer": "char",
        "warmup_steps": 5,
        "seed": 3,
        "jit_compile": False,
        "train_steps": 12,
        "eval_every": 4,
        # Output only: TensorBoard's train scalars every 3 steps and at each
        # validation, so that test_tensorboard.py reads both cadences in this run.
        "log_every": 3,
        "validation_translations": 16,
        "shuffle_buffer": 64,
    }
    values.update(overrides)
    return TrainConfig(**values)


def pairs_file(tmp_path_factory):
    """The 300 bundled pairs as a TSV file, shared by the run and the tests."""
    written = once_per_test_run(
        tmp_path_factory,
        "tiny_pairs",
        lambda directory: {
            "path": str(
                text.write_pairs(
                    directory / "pairs.tsv", text.load_bundled_dates()[:300]
                )
            )
        },
    )
    return pathlib.Path(written["path"])


def twelve_steps(tmp_path_factory, data):
    """The run of `tiny_train_config()` on ``data``: its directory, summary,
    history, test pairs and the warnings its training gave (a namespace)."""

    def produce(directory):
        from keras_selfattn.training import train

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = train(
                str(data), directory / "run", TINY_MODEL, tiny_train_config(), verbose=0
            )
        return {
            "run_dir": str(result.run_dir),
            "summary": result.summary,
            "history": result.history,
            "test_pairs": result.test_pairs,
            "warnings": [str(w.message) for w in caught],
        }

    shared = once_per_test_run(tmp_path_factory, "twelve_step_run", produce)
    return types.SimpleNamespace(
        **{**shared, "run_dir": pathlib.Path(shared["run_dir"])}
    )


def command_line_run(tmp_path_factory):
    """The finished run of ``keras-selfattn train --epochs 2`` (with its figures)
    on the 300 bundled pairs, trained once per test run in a fresh process as a
    user who never set TF_CPP_MIN_LOG_LEVEL runs it: tests/test_cli.py reads it,
    and tests/training/test_continuation.py continues a copy of it. Returns
    ``root`` (its data ``pairs.tsv``, the run ``run`` and ``pristine``, a copy
    taken before any test read the run), and the command's ``status``,
    ``stdout`` and ``stderr`` (a namespace)."""
    from tests.bad_input_cases import TINY_RUN_WITH_FIGURES

    def produce(directory):
        data = text.write_pairs(
            directory / "pairs.tsv", text.load_bundled_dates()[:300]
        )
        env = dict(os.environ, PYTHONPATH=str(REPO))
        env.pop("TF_CPP_MIN_LOG_LEVEL", None)
        argv = ["train", "--data", str(data), "--out", str(directory / "run")]
        done = subprocess.run(
            [sys.executable, "-m", "keras_selfattn", *argv, "--epochs", "2"]
            + TINY_RUN_WITH_FIGURES,
            capture_output=True,
            text=True,
            env=env,
            timeout=600,
            check=False,
        )
        if done.returncode == 0:
            shutil.copytree(directory / "run", directory / "pristine")
        return {
            "root": str(directory),
            "status": done.returncode,
            "stdout": done.stdout,
            "stderr": done.stderr,
        }

    shared = once_per_test_run(tmp_path_factory, "command_line_run", produce)
    return types.SimpleNamespace(**{**shared, "root": pathlib.Path(shared["root"])})


# Runs ``keras-selfattn ARGS`` as the console script does and says on stderr
# whether matplotlib was imported (tests/serving/test_command_imports.py's probe).
IMPORTS_PROBE = REPO / "tests" / "serving" / "imports_probe.py"


def no_figures_run(tmp_path_factory):
    """``keras-selfattn train --epochs 1`` with TINY_RUN_ARGS (``--no-figures``) on
    the 300 bundled pairs, in a fresh process that reports whether it imported
    matplotlib; while it holds the run directory, the same command is started in
    this process (it must be refused). Trained once per test run. Returns
    ``root`` (its data ``pairs.tsv`` and the run ``run``), the first command's
    ``status``, ``stdout``, ``stderr``, ``pid`` and ``imported`` (the probe's
    line),
    and the second's ``second`` (status, stdout, stderr), a namespace."""
    from tests.bad_input_cases import TINY_RUN_ARGS, run_in_process

    def produce(directory):
        data = text.write_pairs(
            directory / "pairs.tsv", text.load_bundled_dates()[:300]
        )
        run = directory / "run"
        argv = ["train", "--data", str(data), "--out", str(run)]
        argv += ["--epochs", "1", *TINY_RUN_ARGS]
        env = dict(os.environ, PYTHONPATH=str(REPO))
        env.pop("MPLCONFIGDIR", None)
        first = subprocess.Popen(
            [sys.executable, str(IMPORTS_PROBE), *argv],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        try:
            _wait_until_started(first, run)
            second = run_in_process(argv)
            stdout, stderr = first.communicate(timeout=600)
        finally:
            if first.poll() is None:
                first.kill()
        return {
            "root": str(directory),
            "status": first.returncode,
            "stdout": stdout,
            "stderr": stderr,
            "pid": first.pid,
            # "matplotlib imported: True|False", the probe's last line
            "imported": (stderr.strip().splitlines() or [""])[-1],
            "second": [second.status, second.stdout, second.stderr],
        }

    shared = once_per_test_run(tmp_path_factory, "no_figures_run", produce)
    return types.SimpleNamespace(**{**shared, "root": pathlib.Path(shared["root"])})


def _wait_until_started(process, run):
    """Until ``process`` holds ``run``'s lock (or, on a tree without one, has
    started writing the run)."""
    lock_file, started = run / "train.lock", run / "config.json"
    deadline = time.monotonic() + 300
    while not (lock_file.exists() and lock_file.stat().st_size) and not (
        started.exists()
    ):
        if process.poll() is not None:
            raise AssertionError(process.communicate()[1][-3000:])
        assert time.monotonic() < deadline, "the first train never started"
        time.sleep(0.05)
