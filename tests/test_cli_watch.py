"""Watching `train` from the command line: --preset, validation translations and
scores, progress lines, history.csv, and the exit status of a run that does not
translate."""

import csv
import json
import re

import pytest

from keras_selfattn import text
from keras_selfattn.config.presets import preset_configs
from tests import forked_commands
from tests.bad_input_cases import run_in_process
from tests.test_cli import TF_LOG_LINE, user_env

pytestmark = pytest.mark.slow

TINY_MODEL = [
    *("--num-hiddens", "16", "--num-heads", "2", "--num-layers", "1"),
    *("--ffn-hiddens", "32", "--decoder-units", "16", "--embedding-dim", "16"),
    *("--max-target-len", "12", "--no-jit-compile", "--batch-size", "16"),
]

# The shortest run a failed check fails, lowered in the test's `train` process
# (errors.HEALTH_EXIT_UPDATES is 1,000 updates: about two minutes of training
# here). tests/test_health_exit.py checks the rule at its real threshold.
STEPS = 12
# The `keras-selfattn` console script (its name quiets TensorFlow as the
# command's does) with that threshold: the rule is read when the run ends.
LOWERED_THRESHOLD = (
    "import sys\n"
    "sys.argv[0] = 'keras-selfattn'\n"
    "from keras_selfattn.cli import errors, main\n"
    f"errors.HEALTH_EXIT_UPDATES = {STEPS}\n"
    "sys.exit(main())\n"
)


def test_a_run_that_does_not_translate_fails_loudly(tmp_path):
    """The validation set's sources are all one sentence, so any model writes one
    translation for twenty different references: the health check must fail at
    every validation, and the run, long enough for a model to be expected to
    translate (`errors.HEALTH_EXIT_UPDATES` updates past its warm-up, lowered to
    `STEPS` in this process), must end with exit status 3."""
    pairs = text.load_bundled_dates()
    data = text.write_pairs(tmp_path / "train.tsv", pairs[:200])
    same_source = [("14 juillet 1989", target) for _, target in pairs[200:220]]
    valid = text.write_pairs(tmp_path / "valid.tsv", same_source)
    run = tmp_path / "run"
    argv = [
        "train",
        "--preset",
        "small",
        *("--data", data, "--valid-data", valid, "--out", run),
        *("--target-tokenizer", "char", "--source-tokenizer", "word"),
        *TINY_MODEL,
        *("--train-steps", STEPS, "--eval-every", STEPS // 2, "--warmup-steps", 4),
        *("--log-every", "10"),
        *("--validation-translations", "20"),
        "--no-figures",
    ]
    result = forked_commands.run(
        ["-c", LOWERED_THRESHOLD, *map(str, argv)],
        check=False,
        capture_output=True,
        text=True,
        env=user_env(),
        timeout=600,
    )
    assert not TF_LOG_LINE.search(result.stderr), result.stderr[-3000:]
    assert result.returncode == 3, result.stderr[-3000:]
    # The alarm at each validation, then the one error line naming the run.
    alarms = re.findall(
        r"warning: step (\d+): the model is not translating", result.stderr
    )
    assert alarms == [str(STEPS // 2), str(STEPS)]
    assert "same sentence for every input" in result.stderr
    assert re.search(
        r"error: at the last validation the model was not translating: "
        rf".*{re.escape(str(run))}",
        result.stderr,
    )
    out = result.stdout
    # Progress lines off a terminal: step, loss, target tokens/s, ETA.
    assert re.search(
        # (an ETA from the first line: its interval has steps past the compiling
        # one; the first interval may have no speed yet)
        rf"^step 10/{STEPS}  loss [\d.]+(  [\d,]+ target tokens/s)?  "
        r"ETA \d+:\d\d:\d\d$",
        out,
        re.MULTILINE,
    )
    # Each validation, on a line of its own under the step's one progress line:
    # loss and CPU time, scores, three examples with references.
    assert re.search(
        rf"^validation at step {STEPS}/{STEPS}:  loss [\d.]+  val_loss [\d.]+ .* CPU-s",
        out,
        re.MULTILINE,
    )
    assert len(re.findall(rf"^step {STEPS}/{STEPS}  ", out, re.MULTILINE)) == 1
    assert re.search(
        r"^  chrF [\d.]+  BLEU [\d.]+  distinct 0\.05  ", out, re.MULTILINE
    )
    examples = re.findall(
        r"^  14 juillet 1989 => .* \(reference: (.*)\)$", out, re.MULTILINE
    )
    assert examples[:3] == [target for _, target in same_source[:3]]
    with open(run / "history.csv", newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 2
    for row in rows:
        assert float(row["val_distinct"]) == pytest.approx(1 / 20)
        assert 0 <= float(row["val_chrf"]) <= 100 and float(row["cpu_seconds"]) > 0
        assert row["val_example_2"].endswith(f"(reference: {same_source[1][1]})")
    summary = json.loads((run / "training.json").read_text())
    assert summary["best_by"] == "chrf" and summary["health"]["ok"] is False
    # The preset's settings, but the flags given win.
    config = json.loads((run / "config.json").read_text())
    small_model, small = preset_configs("small")
    assert config["train"]["warmup_steps"] == 4 != small.warmup_steps
    assert config["train"]["lr_schedule"] == small.lr_schedule
    assert config["train"]["label_smoothing"] == small.label_smoothing
    assert config["model"]["norm_first"] is True
    assert config["model"]["attentional_output"] is True
    assert config["model"]["tie_embeddings"] is small_model.tie_embeddings is True
    assert config["model"]["deep_output_hiddens"] == small_model.deep_output_hiddens
    assert small_model.deep_output_hiddens == 1024
    assert config["train"]["bucket_spacing"] == small.bucket_spacing == "geometric"
    # The preset leaves XLA to the device; --no-jit-compile decides it outright.
    assert small.jit_compile is None and config["train"]["jit_compile"] is False
    assert config["model"]["num_hiddens"] == 16  # --num-hiddens over the preset's 256
    # bfloat16 where this machine multiplies it natively, float32 elsewhere
    assert config["train"]["mixed_precision"] == small.mixed_precision == "auto"
    assert re.search(
        r"^mixed precision: auto -> (mixed_bfloat16|float32)$", out, re.MULTILINE
    )
    assert config["train"]["target_tokenizer"] == "char"


def test_an_unknown_preset_is_refused():
    """An argparse refusal, in this process (tests/test_cli.py checks exit status
    2 and its one line in real processes)."""
    result = run_in_process(["train", "--preset", "huge", "--data", "x", "--out", "y"])
    assert result.status == 2
    assert "argument --preset: invalid choice: 'huge'" in result.stderr
