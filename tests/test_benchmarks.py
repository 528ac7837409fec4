"""Smoke test: every performance benchmark runs in --quick mode and prints its tables.

The benchmarks are scripts (``benchmarks/*.py``), not package modules: each is
loaded from its path and its ``main(["--quick"])`` run in this process (tiny
shapes, one or two rounds, no XLA). Figures are not checked -- they are noise at
these sizes -- only that each script still runs end to end and prints a
markdown table with the command that produced it.
"""

import importlib.util
import pathlib
import sys

import pytest

BENCHMARKS = pathlib.Path(__file__).resolve().parents[1] / "benchmarks"
SCRIPTS = (
    "attention_vs_keras",
    "attention_layouts",
    "decoder_train_step",
    "decoding_latency",
    "served_precision",
    "shortlist_coverage",
    "attention_scaling",
    "training_throughput",
    "vocab_learning",
)


def _load(name):
    if str(BENCHMARKS) not in sys.path:
        sys.path.insert(0, str(BENCHMARKS))  # the scripts import their helper _bench
    spec = importlib.util.spec_from_file_location(
        f"benchmark_{name}", BENCHMARKS / f"{name}.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
@pytest.mark.parametrize("name", SCRIPTS)
def test_benchmark_runs_in_quick_mode(name, capsys):
    _load(name).main(["--quick"])
    out = capsys.readouterr().out
    assert "|---|" in out, out
    assert f"command: .venv/bin/python benchmarks/{name}.py --quick" in out, out


@pytest.mark.slow
def test_keras_hub_peer_runs_in_quick_mode(tmp_path, capsys):
    """The KerasHub peer (issue 24): a few steps on the bundled dates, then scored.

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
