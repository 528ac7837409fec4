"""A run trained under TensorFlow translates the same under JAX.

`Translator` tokenizes and detokenizes with TensorFlow (tf.text) on every backend
and decodes with the Keras backend's search (jitted on JAX): greedy and beam
translations, their scores and attention, and `evaluate`'s figures agree.
"""

import importlib.util
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from keras_selfattn import text
from keras_selfattn.inference import evaluate, load_translator
from tests.test_jax_backend import fast_compile_flags

# One xdist worker runs every serving test, so the session fixtures train once.
pytestmark = [
    pytest.mark.slow,
    pytest.mark.jax,
    pytest.mark.skipif(
        importlib.util.find_spec("jax") is None, reason="jax is not installed"
    ),
]

SCRIPT = pathlib.Path(__file__).with_name("jax_translate_process.py")
REPO = pathlib.Path(__file__).resolve().parents[2]


def under_jax(run_dir, texts, tmp_path, tmp_path_factory):
    texts_file = tmp_path / "texts.json"
    texts_file.write_text(json.dumps(texts))
    env = dict(
        os.environ,
        KERAS_BACKEND="jax",
        JAX_PLATFORMS="cpu",
        PYTHONPATH=str(REPO),
        TF_CPP_MIN_LOG_LEVEL="3",
    )
    # XLA's faster compiling (the jitted searches' compiles are most of the run);
    # the figures compared here agree with the default's within 1e-6.
    env["XLA_FLAGS"] = " ".join(
        [env.get("XLA_FLAGS", ""), *fast_compile_flags(env, tmp_path_factory)]
    )
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(run_dir), str(texts_file)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


def test_a_tensorflow_run_translates_the_same_under_jax(
    text_run_dir, sample_texts, tmp_path, tmp_path_factory
):
    translator = load_translator(text_run_dir)
    greedy = translator.translate(sample_texts, return_attention=True)
    beam = translator.translate(sample_texts, beam_size=4)
    pairs = text.read_pairs(pathlib.Path(text_run_dir) / "splits" / "test.tsv")[:24]
    metrics = evaluate(translator, pairs, beam_size=2)
    jax_run = under_jax(text_run_dir, sample_texts, tmp_path, tmp_path_factory)

    assert jax_run["backend"] == "jax"
    assert len({t.text for t in greedy}) > 3  # translations that differ
    for name, ours in (("greedy", greedy), ("beam", beam)):
        theirs = jax_run[name]
        assert [t.text for t in ours] == [t[0] for t in theirs], name
        assert [t.target_tokens for t in ours] == [t[2] for t in theirs], name
        np.testing.assert_allclose(
            [t.score for t in ours], [t[1] for t in theirs], atol=1e-4
        )
    for ours, theirs in zip(greedy, jax_run["attention"]):
        if ours.attention is None:
            assert theirs is None
        else:
            np.testing.assert_allclose(ours.attention, theirs, atol=1e-5)
    assert metrics["examples"] == jax_run["metrics"]["examples"]
    for key in ("bleu", "chrf", "exact_match", "distinct_translations"):
        assert metrics[key] == pytest.approx(jax_run["metrics"][key]), key
