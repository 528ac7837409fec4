"""``keras-selfattn build-vocab``: what it writes is what a run directory holds, from the stream."""

import pytest

from keras_selfattn import text
from keras_selfattn.cli import main
from keras_selfattn.text import learn_vocab, stream
from keras_selfattn.training import TrainConfig
from keras_selfattn.training.run_tokenizer import tokenizer_configs
from keras_selfattn.workflows import build_vocab


def test_build_vocab_writes_a_run_directory_tokenizer(tmp_path, capsys):
    pairs = text.load_bundled_dates()[:200]
    first = text.write_pairs(tmp_path / "a.tsv.gz", pairs[:120])
    text.write_pairs(tmp_path / "b.tsv.gz", pairs[120:])
    out = tmp_path / "vocab"
    code = main(
        [
            "build-vocab",
            "--data",
            str(tmp_path / "*.tsv.gz"),
            "--out",
            str(out),
            "--target-tokenizer",
            "char",
            "--vocab-sample-lines",
            "150",
        ]
    )
    assert code == 0 and "source vocabulary" in capsys.readouterr().out
    loaded = text.PairTokenizer.load(out)
    # The tokenizer options of the command: TrainConfig's defaults, a char target.
    configs = tokenizer_configs(TrainConfig(target_tokenizer="char"))
    expected = learn_vocab.learn_pair_tokenizer(
        stream.pair_stream(stream.resolve_data_files(str(tmp_path / "*.tsv.gz"))),
        *configs,
        sample_lines=150,
    )
    assert loaded.config() == expected.config()
    assert loaded.source.vocabulary.tokens == expected.source.vocabulary.tokens
    assert loaded.target.config.kind == "char"
    # An existing vocabulary is kept unless --overwrite.
    with pytest.raises(SystemExit) as exited:
        main(["build-vocab", "--data", str(first), "--out", str(out)])
    assert exited.value.code == 2
    assert "already holds vocabularies" in capsys.readouterr().err
    build_vocab(str(first), out, TrainConfig(target_tokenizer="char"), overwrite=True)
    assert text.PairTokenizer.load(out).source_vocab_size <= loaded.source_vocab_size
    with pytest.raises(FileNotFoundError, match="nothing"):
        build_vocab(str(tmp_path / "nothing*.tsv"), tmp_path / "v2")
