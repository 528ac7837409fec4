"""The tiny trained runs the serving tests export (shared by conftest.py and the
tests)."""

import dataclasses
import json
import pathlib
import shutil
import tempfile

from keras_selfattn import serving, text
from keras_selfattn.models import ModelConfig, saving
from keras_selfattn.run_directory import layout
from keras_selfattn.run_directory.settings import save_run_config
from keras_selfattn.training import TrainConfig, train

# Small, but trained enough (6 short epochs) that translations differ between
# sentences, so equality with `keras-selfattn translate` means something.
TINY_MODEL = ModelConfig(
    num_hiddens=32,
    num_heads=2,
    num_layers=1,
    ffn_hiddens=64,
    dropout=0.0,
    decoder_units=32,
    embedding_dim=16,
    max_source_len=12,
    max_target_len=12,
)
NUM_PAIRS = 600
BEAM_SIZE = serving.DEFAULT_BEAM_SIZE


def tiny_configs(
    tokenizer_ops, tokenizers=("word", "char"), model=TINY_MODEL, **options
):
    """``(ModelConfig, TrainConfig)`` of a tiny run; ``tokenizers``: the source and
    target kinds; ``model``: its `ModelConfig`; ``options``: `TrainConfig` fields,
    over the defaults below."""
    settings = {
        "epochs": 6,
        "batch_size": 32,
        "learning_rate": 1e-2,
        "warmup_steps": 5,
        "patience": 100,
        "jit_compile": False,
        "source_tokenizer": tokenizers[0],
        "target_tokenizer": tokenizers[1],
        "split_digits": True,
        "tokenizer_ops": tokenizer_ops,
        "validation_translations": 0,  # no translations at each validation
        "best_by": "loss",
    }
    return model, TrainConfig(**{**settings, **options})


def train_tiny(run_dir, tokenizer_ops, **settings):
    """A tiny run trained into ``run_dir`` (`tiny_configs` takes ``settings``)."""
    model, config = tiny_configs(tokenizer_ops, **settings)
    return train(
        text.load_bundled_dates()[:NUM_PAIRS], run_dir, model, config, verbose=0
    ).run_dir


# The committed tiny runs the serving tests read (tests/serving/data/<name>),
# by name: `tiny_configs`' arguments. `make_tiny_runs` trains and writes them.
COMMITTED_RUNS = {
    # Tokenizers on tensorflow-text ops (case folding, whitespace tokenizer).
    "text_run": {"tokenizer_ops": "tensorflow_text"},
    # Core TensorFlow ops only, and a deep output (`DeepOutput`), so the served
    # graphs, the op audit and the fresh-process loads cover it.
    "core_run": {
        "tokenizer_ops": "core",
        "model": dataclasses.replace(TINY_MODEL, deep_output_hiddens=48),
    },
    # Both sides SentencePiece models learned from the run's training pairs.
    "sentencepiece_run": {
        "tokenizer_ops": "tensorflow_text",
        "tokenizers": ("sentencepiece", "sentencepiece"),
    },
}
DATA_DIR = pathlib.Path(__file__).with_name("data")
REBUILD_COMMAND = "python -m tests.serving.make_tiny_runs"


def committed_files(name):
    """The files of the committed run ``name`` (paths relative to it), named by
    the run directory's layout: what the serving tests and the code they call
    read of a finished run (the model, its settings and tokenizers, the shortlist
    table, the splits, the history and the finished record). Left out: what only
    resuming or continuing a run reads (``data.json``, ``pairs.tsv``, backups)
    and TensorBoard's events."""
    run = layout.RunLayout(".")
    paths = [
        run.model,
        run.config,
        run.tokenizer_config,
        run.root / layout.SOURCE_VOCAB_FILE,
        run.root / layout.TARGET_VOCAB_FILE,
        run.shortlist,
        run.test_split,
        run.validation_split,
        run.history,
        run.finished,
    ]
    if COMMITTED_RUNS[name].get("tokenizers", ("word",))[0] == "sentencepiece":
        paths += [run.root / f for f in layout.SENTENCEPIECE_MODEL_FILES.values()]
    return sorted(path.as_posix() for path in paths)


def stale_reasons(name, run_dir=None):
    """Why the committed run ``name`` (at ``run_dir``, by default its folder in
    `DATA_DIR`) no longer matches the code that reads it: its files are not the
    ones `committed_files` names, or its ``config.json`` is not what today's
    `ModelConfig` and `TrainConfig` write for its settings (a default changed, a
    field was added or removed). Empty when it matches. Reads no model."""
    run_dir = pathlib.Path(run_dir or DATA_DIR / name)
    found = sorted(
        p.relative_to(run_dir).as_posix() for p in run_dir.rglob("*") if p.is_file()
    )
    expected = committed_files(name)
    reasons = []
    if found != expected:
        reasons.append(
            f"its files {found} are not those the run layout names {expected}"
        )
    config_file = run_dir / layout.CONFIG_FILE
    if config_file.is_file():
        saved = json.loads(config_file.read_text(encoding="utf-8"))
        with tempfile.TemporaryDirectory() as directory:
            today = pathlib.Path(directory) / layout.CONFIG_FILE
            save_run_config(today, *tiny_configs(**COMMITTED_RUNS[name]))
            written = json.loads(today.read_text(encoding="utf-8"))
        for key in sorted(set(saved) | set(written)):
            differ = sorted(
                field
                for field in set(saved.get(key, {})) | set(written.get(key, {}))
                if saved.get(key, {}).get(field, "absent")
                != written.get(key, {}).get(field, "absent")
            )
            if differ:
                reasons.append(
                    f"its config.json {key!r} differs from today's for {differ}"
                )
    return reasons


def stale_message(name, reasons):
    """The failure of a stale committed run: what differs and the command that
    rebuilds the committed runs."""
    return (
        f"the committed run {DATA_DIR / name} no longer matches the code that reads "
        f"it ({'; '.join(reasons)}): rebuild the committed runs with "
        f"`{REBUILD_COMMAND}` and commit {DATA_DIR.name}/"
    )


def committed_run(name, directory):
    """A copy of the committed run ``name`` in ``directory`` (tests may write
    into it), after `stale_reasons` found it current."""
    reasons = stale_reasons(name)
    if reasons:
        raise AssertionError(stale_message(name, reasons))
    return pathlib.Path(
        shutil.copytree(DATA_DIR / name, pathlib.Path(directory) / name)
    )


def mixed_bfloat16_copy(run_dir, copy):
    """``copy``: ``run_dir`` as a mixed_bfloat16 run would be (a training saves the
    same float32 weights with layers computing in bfloat16, `with_dtype_policy`,
    and a config saying so), in a second where a training takes ten."""
    run_dir, copy = pathlib.Path(run_dir), pathlib.Path(copy)
    shutil.copytree(run_dir, copy, ignore=shutil.ignore_patterns("backup"))
    model = saving.load_model(
        run_dir / "model.keras", dtype="mixed_bfloat16", compile=False
    )
    model.save(copy / "model.keras")
    config = json.loads((copy / "config.json").read_text(encoding="utf-8"))
    config["train"]["mixed_precision"] = "mixed_bfloat16"
    (copy / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return copy
