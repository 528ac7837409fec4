r"""Translate with a trained run and draw its attention.

Run after `./run.sh demo` (or `keras-selfattn train ... --out RUN_DIR`):
    python examples/translate_and_plot.py --model runs/demo \
        "14 juillet 1989" "3. Mai 2001"
"""

import argparse
import pathlib

from keras_selfattn import plotting
from keras_selfattn.inference import load_translator


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default="runs/demo", help="run directory")
    parser.add_argument(
        "--out", default="attention_plots", help="where the PNG files go"
    )
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument(
        "sentences", nargs="*", default=["14 juillet 1989", "Dienstag, 3. Mai 2001"]
    )
    args = parser.parse_args(argv)

    translator = load_translator(args.model)
    beams = translator.translate(args.sentences, beam_size=args.beam)
    greedy = translator.translate(args.sentences, return_attention=True)
    out = pathlib.Path(args.out)
    for i, (best, seen) in enumerate(zip(beams, greedy)):
        print(
            f"{best.source!r} -> {best.text!r} (beam {args.beam}, score "
            f"{best.score:.3f})"
        )
        if seen.source_tokens:
            path = plotting.plot_attention(
                seen.attention,
                seen.source_tokens,
                seen.target_tokens,
                out / f"attention_{i}.png",
                title=seen.source,
            )
            print(f"  attention heatmap: {path}")
    return beams


if __name__ == "__main__":
    main()
