"""Translates and evaluates with a run under KERAS_BACKEND=jax (run as a script).

    KERAS_BACKEND=jax python jax_translate_process.py RUN_DIR TEXTS_JSON

Loads the run with `load_translator` (the run was trained under TensorFlow),
translates the texts greedily (with attention) and with a beam, scores the run's
test split with `evaluate`, and prints one JSON object: the backend Keras loaded,
``greedy``/``beam``: [[text, score, target_tokens], ...], ``attention``: the
greedy attention arrays as lists, ``metrics``: what `evaluate` returned.
"""

import json
import pathlib
import sys


def main(run_dir, texts_file):
    import keras

    from keras_selfattn import text
    from keras_selfattn.inference import evaluate, load_translator

    texts = json.loads(pathlib.Path(texts_file).read_text())
    translator = load_translator(run_dir)
    greedy = translator.translate(texts, return_attention=True)
    beam = translator.translate(texts, beam_size=4)
    pairs = text.read_pairs(pathlib.Path(run_dir) / "splits" / "test.tsv")[:24]
    metrics = evaluate(translator, pairs, beam_size=2)
    print(
        json.dumps(
            {
                "backend": keras.config.backend(),
                "greedy": [[t.text, t.score, t.target_tokens] for t in greedy],
                "beam": [[t.text, t.score, t.target_tokens] for t in beam],
                "attention": [
                    None if t.attention is None else t.attention.tolist()
                    for t in greedy
                ],
                "metrics": metrics,
            }
        )
    )


if __name__ == "__main__":
    main(*sys.argv[1:])
