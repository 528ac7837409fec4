"""Shared helpers of the benchmarks: interleaved timing, peak memory, markdown tables.

The machines these run on are shared (2 CPU cores, other jobs running), so an
absolute time is noise. Every benchmark therefore measures the peers it compares
in the SAME process, interleaved round by round (A B B A A B ...: the order flips
every round so a slow drift of the machine's load hits both sides alike), and
reports the median of the per-round ratios, which cancels most of the load the
machine happens to carry during a round. Where a round is long (a pass over many
request batches), `interleaved_items` interleaves item by item instead.

Not a module of the package: the benchmark scripts import it from their own folder.
"""

import os
import platform
import statistics
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def interleaved(functions, rounds, calls_per_round=1, warmup=2):
    """Times several zero-argument callables round by round, in alternating order.

    Args:
        functions: dict name -> callable. Each call must block until its result
            is ready (convert a tensor to NumPy, or call ``.numpy()``).
        rounds: number of rounds; in each every function runs ``calls_per_round``
            times back to back. The order is reversed every other round.
        calls_per_round: calls timed together (their mean is one sample).
        warmup: untimed calls of each function first (tracing, XLA compilation).

    Returns:
        dict name -> list of per-call seconds, one sample per round.
    """
    names = list(functions)
    for name in names:
        for _ in range(warmup):
            functions[name]()
    samples = {name: [] for name in names}
    for r in range(rounds):
        order = names if r % 2 == 0 else names[::-1]
        for name in order:
            fn = functions[name]
            start = time.perf_counter()
            for _ in range(calls_per_round):
                fn()
            samples[name].append((time.perf_counter() - start) / calls_per_round)
    return samples


def interleaved_items(functions, items, rounds, warmup=1):
    """Times several one-argument callables item by item: each item goes to every
    callable in turn, the order rotating from item to item, so that a slow spell
    of a shared machine (seconds long, where a pass over all items is too) falls
    on every callable alike.

    Args:
        functions: dict name -> callable taking one item; each call must block
            until its result is ready.
        items: the inputs (e.g. the request batches of one pass).
        rounds: number of passes over ``items``.
        warmup: untimed passes of each callable over the first item first.

    Returns:
        dict name -> list of per-round seconds (the sum over the items).
    """
    names = list(functions)
    for name in names:
        for _ in range(warmup):
            functions[name](items[0])
    samples = {name: [0.0] * rounds for name in names}
    turn = 0
    for r in range(rounds):
        for item in items:
            start = turn % len(names)
            turn += 1
            for name in names[start:] + names[:start]:
                began = time.perf_counter()
                functions[name](item)
                samples[name][r] += time.perf_counter() - began
    return samples


def run_python(args, *, check=False, **kwargs):
    """`subprocess.run` of ``[sys.executable, *args]``: a Python process of the
    benchmark's own (a measurement that wants a process to itself).

    tests/test_benchmarks.py puts `tests.forked_commands.run` (the same call) in
    its place while a quick mode runs: each such process is then forked from one
    that has imported TensorFlow already, so a smoke run pays no interpreter
    start-up a process (a quick mode's figures are not its question).
    """
    return subprocess.run([sys.executable, *args], check=check, **kwargs)


def calls_for(fn, seconds):
    """How many calls of ``fn`` take about ``seconds`` (one sample of `interleaved`)."""
    fn()
    start = time.perf_counter()
    fn()
    return max(1, round(seconds / max(time.perf_counter() - start, 1e-4)))


def median(values):
    return statistics.median(values)


def percentile(values, q):
    """The q-th percentile (0..100) by linear interpolation."""
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    position = (len(ordered) - 1) * q / 100.0
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def paired_ratio(samples, numerator, denominator):
    """Median over rounds of samples[numerator][r] / samples[denominator][r]."""
    return statistics.median(
        a / b for a, b in zip(samples[numerator], samples[denominator])
    )


# The tiny model of the benchmarks' --quick runs: checks that a script runs, in
# seconds (tests/test_benchmarks.py); its numbers mean nothing.
TINY_MODEL = {
    "num_hiddens": 16,
    "num_heads": 2,
    "num_layers": 1,
    "ffn_hiddens": 16,
    "decoder_units": 16,
    "embedding_dim": 8,
}


def tiny_model_config(max_source_len=8, max_target_len=8):
    """The `ModelConfig` of `TINY_MODEL` with these length limits."""
    from keras_selfattn.models import ModelConfig

    return ModelConfig(
        **TINY_MODEL, max_source_len=max_source_len, max_target_len=max_target_len
    )


def quick_run(scratch):
    """``(run directory, test TSV)``: `TINY_MODEL` trained one short epoch on 288
    of the bundled dates (word source, character target, digits split), and a test
    TSV of the next 32 pairs. What the ``--quick`` modes that serve a trained run
    measure; a test run makes it once and passes it to them with ``--run``."""
    from keras_selfattn import text
    from keras_selfattn.training import TrainConfig, train

    pairs = text.load_bundled_dates()[:320]
    config = TrainConfig(
        epochs=1,
        batch_size=32,
        jit_compile=False,
        source_tokenizer="word",
        target_tokenizer="char",
        split_digits=True,
        validation_translations=0,
        best_by="loss",
    )
    model = tiny_model_config(max_source_len=12, max_target_len=12)
    run = train(pairs[:288], os.path.join(scratch, "run"), model, config, verbose=0)
    test = os.path.join(scratch, "test.tsv")
    with open(test, "w", encoding="utf-8") as out:
        out.writelines(f"{source}\t{target}\n" for source, target in pairs[288:])
    return str(run.run_dir), test


def quick_export(run_dir, **options):
    """``--quick``: `serving.export_run` of the tiny run ``run_dir`` with
    ``options``, written once beside the run (``RUN/../quick_exports/``, a
    folder per set of options) and found there by the quick modes that export
    the same after it. A test run serves one quick run in three scripts
    (tests/test_benchmarks.py), and exporting the tiny run costs more CPU than
    serving it: each export is made once, each script still loads and serves it.
    """
    import pathlib

    from keras_selfattn import serving

    name = "_".join(f"{key}-{value}" for key, value in sorted(options.items()))
    base = pathlib.Path(run_dir).parent / "quick_exports" / (name or "default")
    made = sorted(base.glob("[0-9]*/saved_model.pb"))
    if made:
        return made[0].parent
    return serving.export_run(run_dir, base, **options)


def compiled_seq2seq(
    source_vocab, target_vocab, config, policy, jit_compile, learning_rate, clipnorm=1.0
):
    """`build_seq2seq` under the dtype ``policy``, compiled as `train` compiles it.

    Adam with gradient clipping, the masked cross-entropy and accuracy; a
    constant learning rate (the benchmarks time steps, they do not train).
    """
    import keras

    from keras_selfattn.models import MaskedAccuracy, build_seq2seq, masked_loss
    from keras_selfattn.training import dtype_policy

    with dtype_policy(policy):
        model = build_seq2seq(source_vocab, target_vocab, config, seed=0)
    model.compile(
        optimizer=keras.optimizers.Adam(learning_rate, clipnorm=clipnorm),
        loss=masked_loss(),
        metrics=[MaskedAccuracy()],
        jit_compile=jit_compile,
    )
    return model


def paper_bleu(hypotheses, tok_ref, lang=None):
    """BLEU as the Multi30k papers compute it (shared/tools/paper_bleu.py's pipeline).

    The hypotheses are lowercased, Moses punctuation-normalized and tokenized
    (escape on) and scored with sacrebleu against ``tok_ref``, the dataset's
    ``*.lc.norm.tok.<lang>`` file, without further tokenization. ``lang``: the
    Moses language, by default the reference file's suffix (``.de``, ``.en``...).
    """
    import pathlib

    import sacrebleu
    from sacremoses import MosesPunctNormalizer, MosesTokenizer

    lang = lang or pathlib.Path(tok_ref).suffix.lstrip(".")
    if not lang.isalpha():
        raise ValueError(
            "paper_bleu needs lang= where tok_ref has no language suffix. "
            f"Received: tok_ref={str(tok_ref)!r}"
        )
    norm, tok = MosesPunctNormalizer(lang=lang), MosesTokenizer(lang=lang)
    references = pathlib.Path(tok_ref).read_text(encoding="utf-8").splitlines()
    hypotheses = [
        tok.tokenize(norm.normalize(h.strip().lower()), escape=True, return_str=True)
        for h in hypotheses
    ]
    return sacrebleu.corpus_bleu(hypotheses, [references], tokenize="none").score


def environment_line():
    """One line naming the versions and the machine (printed under every table)."""
    import keras
    import tensorflow as tf

    try:
        load = "load average {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())
    except OSError:
        load = "load average n/a"
    return (
        f"python {platform.python_version()}, tensorflow {tf.__version__}, keras "
        f"{keras.__version__} "
        f"({keras.backend.backend()} backend), {os.cpu_count()} CPU cores, {load}"
    )


def command_line(script, argv=None):
    """The command that produced the output, for RESULTS.md.

    Args:
        script: the benchmark's ``__file__``.
        argv: the arguments ``main`` received (None: the process's own).
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    return " ".join(
        [".venv/bin/python", f"benchmarks/{os.path.basename(script)}", *argv]
    )


def print_table(headers, rows):
    """Prints a markdown table."""
    print("| " + " | ".join(headers) + " |")
    print("|" + "|".join("---" for _ in headers) + "|")
    for row in rows:
        print("| " + " | ".join(str(cell) for cell in row) + " |")


def ms(seconds):
    return f"{seconds * 1000:.2f}" if seconds < 0.1 else f"{seconds * 1000:.0f}"


def _read_status(field):
    with open("/proc/self/status", encoding="ascii") as handle:
        for line in handle:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise OSError(f"{field} not in /proc/self/status")


def reset_peak_memory():
    """Starts a new peak-memory measurement; returns the resident memory now (bytes).

    On Linux the peak resident set size (VmHWM) is reset to the current one by
    writing 5 to /proc/self/clear_refs, so that one process can measure the peak
    of several calls one after another. Elsewhere (or if that fails) the peak
    is the process's lifetime peak (ru_maxrss): measure in increasing order of size.
    """
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as handle:
            handle.write("5")
        return _read_status("VmRSS")
    except OSError:
        return peak_memory_bytes()


def peak_memory_bytes():
    """The peak resident memory since the last `reset_peak_memory` (or the start)."""
    try:
        return _read_status("VmHWM")
    except OSError:
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak if sys.platform == "darwin" else peak * 1024
