"""How long `keras-selfattn build-vocab` takes to learn vocabularies, per kind.

Runs ``python -m keras_selfattn build-vocab`` once per (corpus, kind), each in its
own process (so its peak RSS is that run's alone), both sides of the same kind,
and reads the per-side learning times the command prints (wall and CPU time:
on a shared machine the CPU time is the figure that does not depend on the
load). Prints a markdown table, with one epoch of training on the same number
of pairs for scale: an
epoch at ``--epoch-tokens-per-s`` target tokens/s (default 1,100, the 2-core
machine's figure on Multi30k) with ``--tokens-per-pair`` target tokens a pair
(default 13).

    python benchmarks/vocab_learning.py --corpus m30k=/work/m30k/train.en-de.tsv \\
        --corpus 1M-synthetic=/tmp/big/1m.tsv --kinds sentencepiece subword

Nothing is downloaded; corpora are ``source<TAB>target`` files (`--data` of
build-vocab), e.g. from ``benchmarks/make_big_corpus.py``.
"""

import argparse
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
import _bench

_SIDE = re.compile(
    r"^(source|target) vocabulary: (\d+) tokens \(.*\) in ([\d.]+) s \(CPU ([\d.]+) "
    r"s\)$"
)


def count_lines(path, limit):
    """Lines of ``path`` (at most ``limit``); ``.gz`` read compressed."""
    import gzip

    opener = gzip.open if str(path).endswith(".gz") else open
    count = 0
    with opener(path, "rt", encoding="utf-8") as handle:
        for _ in handle:
            count += 1
            if count >= limit:
                break
    return count


# Runs the command in this process and reports its own peak RSS and CPU on the
# way out: as the command returns or raises, and from its os._exit, which ends
# the process without reaching the finally block.
_WRAPPER = """
import os, resource, runpy, sys

def report():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(f"PEAK_RSS_KIB {usage.ru_maxrss}", file=sys.stderr)
    print(f"CPU_S {usage.ru_utime + usage.ru_stime}", file=sys.stderr, flush=True)

exit_now = os._exit

def reporting_exit(status):
    report()
    exit_now(status)

os._exit = reporting_exit
sys.argv = ["keras-selfattn"] + sys.argv[1:]
try:
    runpy.run_module("keras_selfattn", run_name="__main__")
finally:
    report()
"""


def run_build_vocab(data, kind, sample_lines, timeout):
    """One build-vocab process: wall seconds, per-side (size, seconds), peak RSS GiB."""
    with tempfile.TemporaryDirectory() as out:
        command = [
            "-c",
            _WRAPPER,
            "build-vocab",
            "--data",
            str(data),
            "--out",
            out,
            "--source-tokenizer",
            kind,
            "--target-tokenizer",
            kind,
            "--vocab-sample-lines",
            str(sample_lines),
            "--overwrite",
        ]
        env = dict(os.environ, PYTHONPATH=str(REPO), TF_CPP_MIN_LOG_LEVEL="2")
        start = time.perf_counter()
        try:
            done = _bench.run_python(
                command,
                capture_output=True,
                text=True,
                env=env,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return {"error": f"timed out after {timeout} s"}
        wall = time.perf_counter() - start
        if done.returncode != 0:
            return {"error": " ".join(done.stderr.strip().splitlines()[-2:])}
        peak = re.search(r"PEAK_RSS_KIB (\d+)", done.stderr)
        sides = {}
        for line in done.stdout.splitlines():
            match = _SIDE.match(line.strip())
            if match:
                sides[match[1]] = (int(match[2]), float(match[3]), float(match[4]))
        cpu = re.search(r"CPU_S ([\d.]+)", done.stderr)
        return {
            "wall": wall,
            "cpu": float(cpu[1]) if cpu else float("nan"),
            "sides": sides,
            "peak_gib": int(peak[1]) / 2**20 if peak else float("nan"),
        }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--corpus",
        action="append",
        default=[],
        help="NAME=PATH of a pair file; repeat",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help=(
            "a smoke run: 300 generated pairs (make_big_corpus.py), no --corpus, "
            "sentencepiece only unless --kinds says"
        ),
    )
    parser.add_argument(
        "--kinds",
        nargs="+",
        default=None,
        help="tokenizers (default: sentencepiece subword)",
    )
    parser.add_argument("--sample-lines", type=int, default=1_000_000)
    parser.add_argument("--timeout", type=int, default=4 * 3600)
    parser.add_argument("--epoch-tokens-per-s", type=float, default=1100.0)
    parser.add_argument("--tokens-per-pair", type=float, default=13.0)
    args = parser.parse_args(argv)
    if args.kinds is None:
        args.kinds = ["sentencepiece"] if args.quick else ["sentencepiece", "subword"]
    with tempfile.TemporaryDirectory() as scratch:
        if args.quick:
            from make_big_corpus import write_corpus

            path = write_corpus(pathlib.Path(scratch) / "quick.tsv", 300)
            args.corpus = [f"quick={path}"]
        if not args.corpus:
            parser.error("give --corpus NAME=PATH (or --quick)")
        rows = _measure(args)
    print()
    print(
        "| corpus | pairs learned from | kind | source: wall / CPU s (tokens) "
        "| target: wall / CPU s (tokens) | whole command: wall / CPU s "
        "| peak RSS (GiB) | one epoch (est., wall) | command CPU / epoch |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    print(f"command: {_command_line(argv)}")


def _command_line(argv):
    argv = sys.argv[1:] if argv is None else list(argv)
    return " ".join([".venv/bin/python", "benchmarks/vocab_learning.py", *argv])


def _measure(args):
    """One table row per (corpus, kind)."""
    rows = []
    for corpus in args.corpus:
        name, _, path = corpus.partition("=")
        lines = count_lines(path, args.sample_lines)
        epoch = lines * args.tokens_per_pair / args.epoch_tokens_per_s
        for kind in args.kinds:
            result = run_build_vocab(path, kind, args.sample_lines, args.timeout)
            if "error" in result:
                rows.append(f"| {name} | {lines:,} | {kind} | {result['error']} |||||")
            else:
                cells = [
                    f"{wall:.1f} / {cpu:.1f} ({size:,})"
                    for size, wall, cpu in (
                        result["sides"]["source"],
                        result["sides"]["target"],
                    )
                ]
                rows.append(
                    f"| {name} | {lines:,} | {kind} | {cells[0]} | {cells[1]} "
                    f"| {result['wall']:.1f} / {result['cpu']:.1f} "
                    f"| {result['peak_gib']:.2f} | {epoch / 60:.0f} min "
                    f"| {result['cpu'] / epoch:.3f} |"
                )
            print(rows[-1], flush=True)
    return rows


if __name__ == "__main__":
    main()
