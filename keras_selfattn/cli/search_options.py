"""--precision, --quantize, --shortlist [N], --max-length-ratio R: the searches'
options, and the one `SearchSettings` a command builds of them and --beam.

The first three choose the searches' output layer
(`keras_selfattn.models.output_layer`); --max-length-ratio caps each sentence's
output relative to its source (`keras_selfattn.decoding.decode`'s
``max_length_ratio``). ``translate``, ``evaluate`` and ``export`` take the same
four, so a user measures BLEU with what the export will serve. Training takes
none: they change the searches of a trained model only. `search_settings`
builds the command's `SearchSettings` once, before Keras loads (the parser's
``configure``), as ``args.settings``.
"""

import argparse
import math
import pathlib

from keras_selfattn.choices import (
    DEFAULT_FREQUENT,
    LENGTH_CAP_MARGIN,
    SEARCH_PRECISIONS,
)
from keras_selfattn.cli.flags import shows
from keras_selfattn.search_settings import SearchSettings

__all__ = [
    "add_search_options",
    "print_export_report",
    "search_settings",
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


def _length_ratio(text):
    """``--max-length-ratio R``: a finite number > 0."""
    try:
        value = float(text)
    except ValueError:
        value = None
    if value is None or not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(
            f"must be a finite number > 0 (output steps per source token). "
            f"Received: {text!r}"
        )
    return value


_length_ratio.__name__ = "ratio"


def add_search_options(parser):
    """Adds --precision, --quantize, --shortlist [N] and --max-length-ratio R to
    a command's parser."""
    parser.add_argument(
        "--precision",
        choices=SEARCH_PRECISIONS,
        default="float32",
        help=(
            "the searches' products: bfloat16 is faster on CPUs with avx512_bf16 "
            "or amx_bf16 (sums, softmaxes and scores stay float32)"
        ),
    )
    quantize = parser.add_argument(
        "--quantize",
        type=_quantize,
        metavar="int8",
        help=(
            "weights in int8 with per-channel scales (half bfloat16's size), "
            "dequantized once per request before the search"
        ),
    )
    shows(quantize, "off")
    shortlist = parser.add_argument(
        "--shortlist",
        type=_shortlist_size,
        nargs="?",
        const=DEFAULT_FREQUENT,
        metavar="N",
        help=(
            "search each batch over its sources' likely target pieces plus the N "
            f"most frequent (N: {DEFAULT_FREQUENT}); the table is RUN/shortlist.npz, "
            "which training writes (keras-selfattn shortlist makes it)"
        ),
    )
    shows(shortlist, "off: the whole vocabulary")
    ratio = parser.add_argument(
        "--max-length-ratio",
        type=_length_ratio,
        metavar="R",
        help=(
            "end each sentence's search after at most R times its source's "
            f"tokens (rounded up) plus {LENGTH_CAP_MARGIN} steps, the end token "
            "included, as Marian's --max-length-factor: a sentence that repeats "
            "itself no longer keeps its batch waiting"
        ),
    )
    shows(ratio, "off: up to the model's maximum target length")
    parser.set_defaults(configure=_configure_search)


def _configure_search(args):
    """``args.settings``: the command's `SearchSettings` (`search_settings`)."""
    args.settings = search_settings(args)


def search_settings(args):
    """The `SearchSettings` of parsed ``args``: ``--beam K`` (greedy for 1)
    and the options `add_search_options` adds."""
    return SearchSettings.for_beam(
        args.beam,
        precision=args.precision,
        quantize=args.quantize,
        shortlist=args.shortlist,
        max_length_ratio=args.max_length_ratio,
    )


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
