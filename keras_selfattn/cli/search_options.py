"""--precision, --quantize, --shortlist [N]: the searches' output layer options.

``translate``, ``evaluate`` and ``export`` take the same three, so a user measures
BLEU with what the export will serve. Training takes neither: they change the
searches of a trained model only (`keras_selfattn.models.output_layer`).
"""

import argparse
import pathlib

from keras_selfattn.choices import DEFAULT_FREQUENT
from keras_selfattn.cli.flags import shows

# `keras_selfattn.models.output_layer.SEARCH_PRECISIONS` (whose module imports
# TensorFlow: loaded when a command runs, not to parse its flags).
PRECISIONS = ("float32", "bfloat16")

__all__ = [
    "add_search_options",
    "print_export_report",
    "search_options",
]


def _shortlist_size(text):
    """``--shortlist N``: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or value < 1:
        raise argparse.ArgumentTypeError(
            f"must be an integer >= 1 (the most frequent target pieces kept). "
            f"Received: {text!r}"
        )
    return value


_shortlist_size.__name__ = "integer"


def _quantize(text):
    """``--quantize``: int8."""
    if text != "int8":
        raise argparse.ArgumentTypeError(f"must be int8. Received: {text!r}")
    return text


_quantize.__name__ = "quantize"


def add_search_options(parser):
    """Adds --precision, --quantize and --shortlist [N] to a command's parser."""
    parser.add_argument(
        "--precision",
        choices=PRECISIONS,
        default="float32",
        help=(
            "the searches' products: bfloat16 is faster on CPUs with avx512_bf16 "
            "or amx_bf16 (sums, softmaxes and scores stay float32)"
        ),
    )
    parser.add_argument(
        "--quantize",
        type=_quantize,
        metavar="int8",
        help=(
            "int8 weights with per-channel scales (half bfloat16's size), "
            "dequantized once per request before the search"
        ),
    )
    shortlist = parser.add_argument(
        "--shortlist",
        type=_shortlist_size,
        nargs="?",
        const=DEFAULT_FREQUENT,
        metavar="N",
        help=(
            "search each batch over its sources' likely target pieces plus the N "
            f"most frequent (N: {DEFAULT_FREQUENT}); the table is RUN/shortlist.npz, "
            "learned from the run's training split when missing"
        ),
    )
    shows(shortlist, "off: the whole vocabulary")


def search_options(args):
    """``{precision, quantize, shortlist}`` of parsed ``args`` (defaults where a
    command has none of them), as `serving.export_run` takes them."""
    return {
        "precision": getattr(args, "precision", "float32"),
        "quantize": getattr(args, "quantize", None),
        "shortlist": getattr(args, "shortlist", None),
    }


def print_export_report(version_dir):
    """Prints the export's report (`serving.export_report`), and where it is."""
    from keras_selfattn.serving import export_report

    report = export_report.read_export_report(version_dir)
    if report is None:
        return
    for line in export_report.format_report(report):
        print(line)
    path = pathlib.Path(version_dir) / "assets.extra" / export_report.REPORT_FILE
    print(f"report: {path}")
