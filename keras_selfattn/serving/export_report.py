"""What an export computes in: ``assets.extra/export_report.json``.

Written by `keras_selfattn.serving.export_translator` beside the warmup records
(TF Serving does not read it): the precision of each product group
(`keras_selfattn.models.precision.PRODUCTS`), the CPU features that precision
assumes, and the vocabulary shortlist's record (where the table came from, its
sizes). ``check-serving`` reads it back and warns when the host lacks the
features (`cpu_warnings`): a bfloat16 product on a CPU without bfloat16 units is
emulated, slower than float32's. It also records the searches' length ratio
(``max_length_ratio``: each sentence's cap of steps relative to its source; None
when off).
"""

import json
import pathlib

from keras_selfattn.choices import LENGTH_CAP_MARGIN
from keras_selfattn.models.output_layer import INT8_PRODUCTS, LOWER_PRECISION_PRODUCTS
from keras_selfattn.models.precision import PRODUCTS

__all__ = [
    "BF16_CPU_FLAGS",
    "INT8_PRODUCTS",
    "REPORT_FILE",
    "cpu_warnings",
    "export_report",
    "format_report",
    "host_cpu_flags",
    "read_export_report",
    "write_export_report",
    "write_translator_report",
]

REPORT_FILE = "export_report.json"
# /proc/cpuinfo flags of the CPUs whose bfloat16 products are native (oneDNN
# runs bfloat16 on AVX512_BF16 or AMX; without either it emulates).
BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")
_SHORTLIST_KEYS = (
    "source",
    "learned_from",
    "association",
    "per_source",
    "frequent",
    "pairs_counted",
    "source_vocab_size",
    "target_vocab_size",
    "entries",
    "bytes",
)


def export_report(translator):
    """The report (a JSON-able dict) of a `Translator`'s served searches: its
    `SearchSettings`, its shortlist's table and its int8 weights."""
    settings = translator.settings
    lowered = LOWER_PRECISION_PRODUCTS if settings.precision == "bfloat16" else ()
    shortlist = translator.shortlist_table
    record = None
    if shortlist is not None:
        record = {
            k: shortlist.record[k] for k in _SHORTLIST_KEYS if k in shortlist.record
        }
    return {
        "precision": {
            group: ("bfloat16" if group in lowered else "float32") for group in PRODUCTS
        },
        "quantize": _quantize_record(translator),
        "cpu_features_assumed": list(BF16_CPU_FLAGS) if lowered else [],
        "cpu_features_note": (
            "bfloat16 products run natively with any one of these CPU flags; "
            "without them they are emulated, slower than float32"
            if lowered
            else "float32 products: no CPU feature assumed"
        ),
        "shortlist": record,
        "max_length_ratio": settings.max_length_ratio,
    }


def _quantize_record(translator):
    """None, or which product groups and weights the export holds as int8."""
    int8_weights = translator.int8_weights
    if int8_weights is None:
        return None
    return {
        "int8": list(INT8_PRODUCTS),
        "weights": int8_weights.paths,
        "bytes": int8_weights.nbytes,
        "scales": "float32, one per output channel (symmetric, max|w| / 127)",
        "dequantized": "once per request, before the search loop",
    }


def write_export_report(saved_model_dir, report):
    """Writes ``saved_model_dir/assets.extra/export_report.json``; returns its path."""
    folder = pathlib.Path(saved_model_dir) / "assets.extra"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / REPORT_FILE
    path.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    return path


def write_translator_report(saved_model_dir, translator):
    """`write_export_report` of `export_report` of ``translator``."""
    return write_export_report(saved_model_dir, export_report(translator))


def read_export_report(saved_model_dir):
    """The export's report, or None (an export without one, or unreadable)."""
    path = pathlib.Path(saved_model_dir) / "assets.extra" / REPORT_FILE
    try:
        report = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return report if isinstance(report, dict) else None


def format_report(report):
    """Lines for a terminal: the precision per group, the features, the
    shortlist, the length ratio."""
    groups = ", ".join(f"{k} {v}" for k, v in report["precision"].items())
    features = " or ".join(report["cpu_features_assumed"]) or "none"
    lines = [f"precision: {groups}", f"CPU features assumed: {features}"]
    quantize = report.get("quantize")
    if quantize:
        lines.append(
            f"int8 weights: {', '.join(quantize['int8'])} "
            f"({len(quantize['weights'])} kernels, {quantize['bytes']} bytes)"
        )
    record = report.get("shortlist")
    if record is None:
        lines.append("shortlist: none (the whole output layer)")
    else:
        lines.append(
            f"shortlist: {record.get('per_source')} per source piece + "
            f"{record.get('frequent')} most frequent, {record.get('entries')} "
            f"entries, {record.get('bytes')} bytes; from {record.get('source')}"
        )
    lines.append(_length_ratio_line(report.get("max_length_ratio")))
    return lines


def _length_ratio_line(ratio):
    """The terminal line of the searches' ``max_length_ratio`` (None: off)."""
    if ratio is None:
        return "max length ratio: none (up to the model's maximum target length)"
    return (
        f"max length ratio: {ratio:g} (each sentence at most ceil({ratio:g} x its "
        f"source tokens) + {LENGTH_CAP_MARGIN} steps)"
    )


def host_cpu_flags(cpuinfo="/proc/cpuinfo"):
    """The CPU flags of ``cpuinfo`` (empty where it cannot be read: not Linux)."""
    try:
        text = pathlib.Path(cpuinfo).read_text(errors="replace")
    except OSError:
        return set()
    flags = set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags":
            flags.update(value.split())
    return flags


def cpu_warnings(report, flags):
    """One line per feature the export assumes and the host lacks (all of them
    missing: bfloat16 products emulated); none when the host has any."""
    assumed = (report or {}).get("cpu_features_assumed") or []
    if not assumed or any(flag in flags for flag in assumed):
        return []
    line = (
        f"this host's CPU has none of {', '.join(assumed)}: the export's bfloat16 "
        "products are emulated here, slower than a float32 export"
    )
    return [line]
