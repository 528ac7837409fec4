"""The tiny trained runs the serving tests export (shared by conftest.py and the
tests)."""

import json
import pathlib
import shutil

from keras_selfattn import serving, text
from keras_selfattn.models import ModelConfig, saving
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


def train_tiny(
    run_dir, tokenizer_ops, tokenizers=("word", "char"), model=TINY_MODEL, **options
):
    """A tiny run; ``tokenizers``: the source and target kinds; ``model``: its
    `ModelConfig`; ``options``: `TrainConfig` fields, over the defaults below."""
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
    config = TrainConfig(**{**settings, **options})
    return train(
        text.load_bundled_dates()[:NUM_PAIRS], run_dir, model, config, verbose=0
    ).run_dir


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
