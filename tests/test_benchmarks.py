"""Every benchmark script runs end to end in its ``--quick`` mode (seconds).

The benchmarks are scripts (``benchmarks/*.py``), not package modules. Most are
loaded from their path and their ``main(["--quick"])`` run in this process, so
that the suite pays TensorFlow's import once; a script that must own its process
(``distributed_throughput.py`` splits the CPU into logical devices before
TensorFlow starts) and the corpus writer run as subprocesses. The Python
processes a script starts for its measurements (``_bench.run_python``) are forked
from one that has imported TensorFlow (`tests.forked_commands`). Figures are not
checked -- they are noise at these sizes -- only that each script prints its
table with the rows and ratios it promises, and the command that produced it.
"""

import importlib.util
import os
import pathlib
import re
import subprocess
import sys

import pytest

from tests import forked_commands

BENCHMARKS = pathlib.Path(__file__).resolve().parents[1] / "benchmarks"
RATIO = re.compile(r"\*\*\d+\.\d+\*\*")  # a bold ratio cell, e.g. **0.93**

# script -> substrings its --quick output holds (beside a table and its command)
IN_PROCESS = {
    "attention_vs_keras": ["ours / keras", RATIO],
    "decoder_train_step": ["ours / book", "utilization", RATIO],
    "decoding_latency": ["greedy / forward", RATIO],
    "training_throughput": ["| float32 | off |", RATIO],
    "vocab_learning": ["sentencepiece"],
    "served_precision": ["bfloat16"],
    "shortlist_coverage": [],
    # against its own export: every text the same
    "served_translator": ["serving_default (greedy) |", "| 0 of 32 |", "| 0 of 128 |"],
    "budget_run": ["| 0.01 | ", "| greedy |", "| beam 2 |"],
    # its one tiny run served as the teacher and as a student
    "distillation": ["| greedy | teacher | float32 |", "| beam 4 | student |", RATIO],
    "scale": ["| 3k | after, --vocab |", "| 3k | build-vocab |"],
}


def _load(name):
    if str(BENCHMARKS) not in sys.path:
        sys.path.insert(0, str(BENCHMARKS))  # the scripts import their helper _bench
    spec = importlib.util.spec_from_file_location(
        f"benchmark_{name}", BENCHMARKS / f"{name}.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _helper():
    """The scripts' own `_bench` (what ``import _bench`` gives them)."""
    return importlib.import_module("_bench")


def _check_output(out, name, expected):
    assert "|---|" in out, out
    assert f"command: .venv/bin/python benchmarks/{name}.py --quick" in out, out
    for item in expected:
        if isinstance(item, str):
            assert item in out, (item, out)
        else:
            assert item.search(out), (item.pattern, out)


# The quick modes that serve a trained run: they share one (`_bench.quick_run`),
# made once for this file, and its exports (`_bench.quick_export`: each made by
# the first script that serves it); budget_run's quick mode trains its own, end
# to end.
ON_THE_QUICK_RUN = {"served_precision", "served_translator", "distillation"}


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    """``["--run", RUN, "--test", TSV]`` of `_bench.quick_run`, trained once."""
    run, test = _load("_bench").quick_run(str(tmp_path_factory.mktemp("quick_run")))
    return ["--run", run, "--test", test]


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(IN_PROCESS))
def test_benchmark_runs_in_quick_mode(name, capsys, request, monkeypatch):
    run = request.getfixturevalue("quick_run") if name in ON_THE_QUICK_RUN else []
    script = _load(name)
    # The Python processes a script starts (scale.py's, vocab_learning.py's),
    # forked from one that has imported TensorFlow, not started afresh.
    monkeypatch.setattr(_helper(), "run_python", forked_commands.run)
    script.main(["--quick", *run])
    out = capsys.readouterr().out
    _check_output(out, name, IN_PROCESS[name])
    # Every cell measured: a figure its process did not report reads "nan".
    assert not re.search(r"\bnan\b", out), out


@pytest.mark.slow
def test_cli_startup_runs_in_quick_mode(capsys):
    _load("cli_startup").main(["--quick"])
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| keras-selfattn")]
    assert any(row.startswith("| keras-selfattn --help |") for row in rows), out
    for row in rows:  # every command timed against `import tensorflow`
        float(row.strip("|").split("|")[-1])
    assert "`.venv/bin/python benchmarks/cli_startup.py --quick`" in out, out


@pytest.mark.slow
def test_distributed_throughput_runs_in_quick_mode():
    """In its own process (forked before TensorFlow's runtime starts:
    `tests.forked_commands`): the CPU is split into two devices before TF starts."""
    done = forked_commands.run(
        [str(BENCHMARKS / "distributed_throughput.py"), "--quick"],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": str(BENCHMARKS.parent)},
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    _check_output(done.stdout, "distributed_throughput", ["mirrored", RATIO])


def test_same_source_batches_repeat_one_pair_a_batch():
    """``--same-source``: the first pair of each batch, as many times as a batch
    holds, so each served batch has rows of one length; a short last batch
    still gives a whole batch."""
    pairs = [(f"s{i}", f"t{i}") for i in range(7)]
    batches = _load("served_precision").same_source_batches(pairs, 3)
    assert batches == [pairs[0]] * 3 + [pairs[3]] * 3 + [pairs[6]] * 3


def test_make_big_corpus_writes_the_pairs_asked(tmp_path):
    out = tmp_path / "pairs.tsv"
    command = [sys.executable, str(BENCHMARKS / "make_big_corpus.py")]
    done = subprocess.run(
        [*command, "--pairs", "250", "--out", str(out)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = out.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 250
    assert all(len(line.split("\t")) == 2 for line in lines)
    lengths = [len(line.split("\t")[0].split()) for line in lines]
    assert min(lengths) >= 2 and max(lengths) <= 80
    bad = subprocess.run(
        [*command, "--pairs", "0", "--out", str(out)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert bad.returncode == 2 and "--pairs must be positive. Received: 0" in bad.stderr


@pytest.mark.slow
def test_keras_hub_peer_runs_in_quick_mode(tmp_path, capsys):
    """The KerasHub peer: a few steps on the bundled dates, then scored.

    Needs the ``peer`` extra (keras-hub); skipped where it is not installed.
    """
    pytest.importorskip("keras_hub")
    _load("keras_hub_peer").main(["--quick", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert "| greedy |" in out and "| beam 2 |" in out, out
    assert "command: .venv/bin/python benchmarks/keras_hub_peer.py --quick" in out, out
    assert (tmp_path / "budgets.json").exists()


def test_paper_bleu_reproduces_the_tok_references_in_their_language(tmp_path):
    """BLEU as the Multi30k papers compute it: the raw sentence, lowercased,
    normalized and Moses-tokenized in the reference file's language, is its own
    ``lc.norm.tok`` reference (100); German rules on English text are not."""
    bench = _load("_bench")
    # multi30k/dataset test_2016_flickr lines 30 and 226: data/task1/raw/*.en and
    # data/task1/tok/*.lc.norm.tok.en
    raw = [
        "One man holds another man's head down and prepares to punch him in the face.",
        'A woman on a boat named "El Corazon" drops black weights into the water.',
    ]
    tok = [
        (
            "one man holds another man &apos;s head down and prepares to punch him in"
            " the face ."
        ),
        (
            "a woman on a boat named &quot; el corazon &quot; drops black weights into"
            " the water ."
        ),
    ]
    (tmp_path / "ref.lc.norm.tok.en").write_text(
        "\n".join(tok) + "\n", encoding="utf-8"
    )
    assert bench.paper_bleu(raw, tmp_path / "ref.lc.norm.tok.en") == pytest.approx(100)
    german_rules = bench.paper_bleu(raw, tmp_path / "ref.lc.norm.tok.en", lang="de")
    assert german_rules < 100
    (tmp_path / "ref_tok").write_text("\n".join(tok) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match="lang=.*tok_ref='.*ref_tok'"):
        bench.paper_bleu(raw, tmp_path / "ref_tok")


GRU_TIED = {"rnn_type": "gru", "decoder_layers": 2, "attentional_output": True}
GRU_TIED |= {"tie_embeddings": True, "embedding_dim": 12, "deep_output_hiddens": 24}
LSTM_UNTIED = {"rnn_type": "lstm", "decoder_layers": 1, "attentional_output": False}
LSTM_UNTIED |= {"tie_embeddings": False, "embedding_dim": 10, "deep_output_hiddens": 0}


@pytest.mark.parametrize(
    "options", [GRU_TIED, LSTM_UNTIED], ids=["gru-tied-deep-output", "lstm-untied"]
)
def test_served_flop_model_has_every_kernel_of_the_model(options):
    """served_translator.py's FLOP count (its ceiling times these products) holds
    each 2-D kernel of a built model once: the encoder's per token, a decoder
    step's per row (the tied embedding as the output layer), nothing else."""
    from keras_selfattn.models import ModelConfig, build_seq2seq

    script = _load("served_translator")
    sizes = {"num_hiddens": 16, "num_heads": 2, "num_layers": 2, "ffn_hiddens": 20}
    config = ModelConfig(**sizes, decoder_units=12, **options)
    model = build_seq2seq(50, 40, config, seed=0)
    kernels = {
        w.path: tuple(w.shape)
        for w in model.weights
        if w.path.endswith(("kernel", "embeddings"))
    }
    per_token = [s for p, s in kernels.items() if p.startswith("encoder_block_")]
    step_names = ("query_dense", "_cell_", "attentional_output", "deep_output")
    step_names += ("logits",)
    per_step = [s for p, s in kernels.items() if any(n in p for n in step_names)]
    if config.tie_embeddings:
        per_step.append(kernels["target_embedding/embeddings"][::-1])
    as_dict = config.__dict__
    assert sorted(script.encoder_products(as_dict)) == sorted(per_token)
    assert sorted(script.step_products(as_dict, 40)) == sorted(per_step)
    bridge = [s for p, s in kernels.items() if p.startswith("bridge/")]
    states = config.decoder_layers * (2 if config.rnn_type == "lstm" else 1)
    assert len(bridge) == states  # what sentence_flops counts for the bridge
