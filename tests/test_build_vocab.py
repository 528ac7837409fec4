"""``keras-selfattn build-vocab``: what it writes is what a run directory holds, from
the stream."""

import re

import pytest
import tensorflow as tf

from keras_selfattn import text
from keras_selfattn.cli import main
from keras_selfattn.jobs import build_vocab
from keras_selfattn.run_directory.settings import load_run_config
from keras_selfattn.run_directory.vocabulary_settings import (
    train_config_with_vocabulary,
)
from keras_selfattn.text import learn_vocab, stream
from keras_selfattn.training import TrainConfig
from keras_selfattn.training.data.run_tokenizer import tokenizer_configs


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


def _german_pairs(tmp_path):
    from tests.text.german_sentences import GERMAN

    pairs = [
        (f"The sentence number {n} is here.", GERMAN[n % len(GERMAN)])
        for n in range(120)
    ]
    return text.write_pairs(tmp_path / "pairs.tsv", pairs)


def test_build_vocab_sentencepiece(tmp_path, capsys):
    data = _german_pairs(tmp_path)
    out = tmp_path / "vocab"
    code = main(
        [
            "build-vocab",
            "--data",
            str(data),
            "--out",
            str(out),
            "--source-tokenizer",
            "sentencepiece",
            "--target-tokenizer",
            "sentencepiece",
        ]
    )
    printed = capsys.readouterr().out
    assert code == 0
    # How long each side took to learn.
    assert re.search(
        r"source vocabulary: \d+ tokens \(sentencepiece\) in [\d.]+ s \(CPU [\d.]+ s\)",
        printed,
    )
    assert re.search(
        r"target vocabulary: \d+ tokens \(sentencepiece\) in [\d.]+ s \(CPU [\d.]+ s\)",
        printed,
    )
    loaded = text.PairTokenizer.load(out)
    assert (out / "source.spm.model").is_file() and (out / "target.spm.model").is_file()
    assert loaded.source.config.kind == loaded.target.config.kind == "sentencepiece"
    assert loaded.source.vocabulary.tokens[:4] == ["<pad>", "<unk>", "<s>", "</s>"]
    targets = [target for _, target in text.read_pairs(data)[:5]]
    decoded = loaded.target.decode(loaded.target.encode(tf.constant(targets)))
    assert [t.decode() for t in decoded.numpy()] == targets

    # The target side from the source's model file, given by the user: read, not
    # learned.
    code = main(
        [
            "build-vocab",
            "--data",
            str(data),
            "--out",
            str(tmp_path / "given"),
            "--target-tokenizer",
            "sentencepiece",
            "--target-sentencepiece-model",
            str(out / "source.spm.model"),
        ]
    )
    assert code == 0 and "sentencepiece model" in capsys.readouterr().out
    given = text.PairTokenizer.load(tmp_path / "given")
    assert given.target.sentencepiece_model == loaded.source.sentencepiece_model

    # A missing model: exit 2, one line naming the option and the path.
    missing = tmp_path / "missing.model"
    with pytest.raises(SystemExit) as exited:
        main(
            [
                "build-vocab",
                "--data",
                str(data),
                "--out",
                str(tmp_path / "v3"),
                "--source-tokenizer",
                "sentencepiece",
                "--source-sentencepiece-model",
                str(missing),
            ]
        )
    assert exited.value.code == 2
    assert f"--source-sentencepiece-model {missing}: no such file" in (
        capsys.readouterr().err
    )
    assert not (tmp_path / "v3").exists()


def test_train_vocab_and_a_named_model_must_agree(tmp_path):
    """`train --vocab DIR` with ``--*-sentencepiece-model``: the same model, or an
    error."""
    from keras_selfattn.training.data.run_tokenizer import load_or_learn_tokenizer

    data = _german_pairs(tmp_path)
    both = TrainConfig(
        source_tokenizer="sentencepiece", target_tokenizer="sentencepiece"
    )
    vocab = tmp_path / "vocab"
    build_vocab(str(data), vocab, both, verbose=False)
    loaded = load_or_learn_tokenizer(vocab, tmp_path / "run1", False, None, both)
    assert (tmp_path / "run1" / "target.spm.model").read_bytes() == (
        loaded.target.sentencepiece_model
    )
    # The vocabulary's own target model, named: fine.
    same = TrainConfig(
        **{**vars(both), "target_sentencepiece_model": str(vocab / "target.spm.model")}
    )
    load_or_learn_tokenizer(vocab, tmp_path / "run2", False, None, same)
    # Another model: refused, naming the option.
    other = TrainConfig(
        **{**vars(both), "target_sentencepiece_model": str(vocab / "source.spm.model")}
    )
    with pytest.raises(ValueError, match="--target-sentencepiece-model"):
        load_or_learn_tokenizer(vocab, tmp_path / "run3", False, None, other)


def test_vocab_size_options_reach_the_learner(tmp_path, capsys):
    pairs = text.load_bundled_dates()[:300]
    data = text.write_pairs(tmp_path / "pairs.tsv", pairs)
    out = tmp_path / "vocab"
    code = main(
        ["build-vocab", "--data", str(data), "--out", str(out)]
        + ["--source-vocab-size", "30", "--target-vocab-size", "12"]
    )
    assert code == 0, capsys.readouterr().err
    sized = text.PairTokenizer.load(out)
    assert (sized.source_vocab_size, sized.target_vocab_size) == (30, 12)
    # The kept words are the most frequent ones: count them with an unlimited
    # vocabulary's own split.
    build_vocab(str(data), tmp_path / "full", TrainConfig())
    full = text.PairTokenizer.load(tmp_path / "full")
    words = full.source.tokenize(tf.constant([source for source, _ in pairs]))
    counts = {}
    for token in words.flat_values.numpy():
        counts[token.decode()] = counts.get(token.decode(), 0) + 1
    kept = set(sized.source.vocabulary.tokens[4:])
    dropped = set(counts) - kept
    assert len(kept) == 26 and dropped
    assert min(counts[t] for t in kept) >= max(counts[t] for t in dropped)
    for bad in ("3", "-1"):
        with pytest.raises(SystemExit) as exited:
            main(
                ["build-vocab", "--data", str(data), "--out", str(tmp_path / "x")]
                + ["--source-vocab-size", bad]
            )
        assert exited.value.code == 2
        # the command line names its own flag, not the Python field
        assert f"Received: --source-vocab-size {bad}" in capsys.readouterr().err


def _without(args, flag):
    """``args`` without ``flag`` and its value."""
    index = args.index(flag)
    return args[:index] + args[index + 2 :]


class _Recorded(Exception):
    """Ends a `train` once its data stage has written the run's settings."""


def _stop_after_the_data_stage(monkeypatch):
    """What the data stage of the next `train` wrote to its run directory
    (config.json's settings, the tokenizer's config), the run stopped there: the
    settings are recorded before the model is built, and training is not what
    is checked."""
    from keras_selfattn.training.fit import stages

    recorded = {}
    prepare_data = stages.prepare_data

    def prepare_then_stop(call, place):
        prepare_data(call, place)
        recorded["settings"] = load_run_config(place.work_dir / "config.json")[1]
        recorded["tokenizer"] = text.PairTokenizer.load(place.work_dir).config()
        raise _Recorded

    monkeypatch.setattr(stages, "prepare_data", prepare_then_stop)
    return recorded


def test_train_takes_the_tokenizer_settings_of_its_vocab(tmp_path, capsys, monkeypatch):
    """`train --vocab DIR` reads DIR's tokenizer.json; only a flag the
    user typed that contradicts it is refused, naming the flag, the value and the
    vocabulary's."""
    from tests.bad_input_cases import TINY_RUN_ARGS, run_in_process

    data = text.write_pairs(tmp_path / "pairs.tsv", text.load_bundled_dates()[:300])
    vocab = tmp_path / "vocab"
    code = main(
        ["build-vocab", "--data", str(data), "--out", str(vocab)]
        + ["--target-tokenizer", "char", "--no-split-digits"]
    )
    assert code == 0, capsys.readouterr().err
    tiny = _without(TINY_RUN_ARGS, "--target-tokenizer")  # the vocabulary's: char
    argv = ["train", "--data", str(data), "--vocab", str(vocab), *tiny]
    argv += ["--train-steps", "2", "--eval-every", "2"]
    # Contradictions typed: refused before anything is read or written.
    for typed, recorded in (
        (["--target-tokenizer", "word"], "target_tokenizer='char'"),
        (["--split-digits"], "split_digits=False"),
        (["--source-vocab-size", "40"], "source_vocab_size=None"),
    ):
        refused = run_in_process([*argv, "--out", str(tmp_path / "no"), *typed])
        assert refused.status == 2, refused
        assert f"{' '.join(typed)} contradicts the vocabulary in {vocab}" in (
            refused.stderr
        )
        assert f"tokenizer.json records {recorded}" in refused.stderr
        assert not (tmp_path / "no").exists()
    # A flag that agrees is no contradiction.
    agreeing = TrainConfig(target_tokenizer="char", split_digits=False)
    given = {"target_tokenizer": "--target-tokenizer char"}
    assert train_config_with_vocabulary(agreeing, vocab, given) == agreeing
    # None typed: the vocabulary's settings, recorded as the run's (when its data
    # stage writes config.json and the tokenizer; the run stops there).
    recorded = _stop_after_the_data_stage(monkeypatch)
    stopped = run_in_process([*argv, "--out", str(tmp_path / "run")])
    assert "_Recorded" in stopped.stderr, stopped.stderr[-3000:]
    saved = recorded["settings"]
    assert (saved.target_tokenizer, saved.split_digits) == ("char", False)
    assert saved.source_tokenizer == "word"
    assert recorded["tokenizer"] == text.PairTokenizer.load(vocab).config()


def test_the_vocabulary_settings_from_python(tmp_path):
    """`train(vocab=...)`: a field away from its default is asked for; a default
    one takes the vocabulary's."""
    build_vocab(
        str(text.write_pairs(tmp_path / "p.tsv", text.load_bundled_dates()[:50])),
        tmp_path / "vocab",
        TrainConfig(target_tokenizer="char"),
        verbose=False,
    )
    taken = train_config_with_vocabulary(TrainConfig(), tmp_path / "vocab")
    assert taken.target_tokenizer == "char"
    assert taken == TrainConfig(target_tokenizer="char")
    with pytest.raises(ValueError) as refused:
        train_config_with_vocabulary(
            TrainConfig(target_tokenizer="subword"), tmp_path / "vocab"
        )
    assert str(refused.value).startswith(
        "train_config.target_tokenizer='subword' contradicts the vocabulary in "
        f"{tmp_path / 'vocab'}: its tokenizer.json records target_tokenizer='char'"
    )
    with pytest.raises(FileNotFoundError, match=r"No tokenizer.json in .*nothere"):
        train_config_with_vocabulary(TrainConfig(), tmp_path / "nothere")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "tokenizer.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match=r"tokenizer.json: damaged \(no source"):
        train_config_with_vocabulary(TrainConfig(), tmp_path / "bad")


def test_an_out_that_cannot_be_written_fails_before_learning(
    tmp_path, capsys, monkeypatch
):
    """A bad --out is refused before build-vocab learns anything: learning is a
    whole pass over the corpus, wasted if the result cannot be written."""
    import os

    learned = []
    monkeypatch.setattr(
        learn_vocab, "learn_pair_tokenizer", lambda *a, **k: learned.append(a)
    )
    data = text.write_pairs(tmp_path / "p.tsv", text.load_bundled_dates()[:50])
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    targets = [blocker / "vocab"]  # under a file: cannot be created, even by root
    if os.geteuid() != 0:  # root writes through permission bits
        locked = tmp_path / "locked"
        locked.mkdir()
        locked.chmod(0o555)
        targets.append(locked)
    for out in targets:
        with pytest.raises(SystemExit) as exited:
            main(["build-vocab", "--data", str(data), "--out", str(out)])
        assert exited.value.code == 2
        err = capsys.readouterr().err
        assert f"error: --out {out} cannot be written (" in err, err
    with pytest.raises(OSError, match="cannot be written"):
        build_vocab(str(data), blocker / "v", TrainConfig(), verbose=False)
    assert not learned  # refused before any learning
    assert not list(tmp_path.rglob("tmp-writable-*"))


def test_build_vocab_from_python_needs_a_directory_name(tmp_path):
    """The command line refuses a blank --out before it starts; `build_vocab`
    refuses a blank ``out_dir`` by name, before reading anything."""
    for blank in ("  ", ""):  # "" too: pathlib reads it as the current directory
        with pytest.raises(ValueError) as refused:
            build_vocab(str(tmp_path / "nothing*.tsv"), blank, verbose=False)
        assert str(refused.value) == (
            f"out_dir must name a directory. Received: {blank!r}"
        )


def test_build_vocab_counts_the_malformed_lines_it_skips(tmp_path, capsys):
    pairs = text.load_bundled_dates()[:40]
    lines = [f"{source}\t{target}" for source, target in pairs]
    lines[5] = "no tab here"
    lines[30] = "\tan empty source"
    data = tmp_path / "pairs.tsv"
    data.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "vocab"
    argv = ["build-vocab", "--data", str(data), "--out", str(out)]
    code = main([*argv, "--skip-malformed", "--source-tokenizer", "char"])
    assert code == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[-1] == "2 malformed lines skipped", printed
    # Without --skip-malformed the first one fails the command, naming its line.
    with pytest.raises(SystemExit) as exited:
        main([*argv, "--overwrite"])
    assert exited.value.code == 2
    assert f"{data}:6:" in capsys.readouterr().err


def test_build_vocab_with_every_line_skipped_has_nothing_to_learn(tmp_path, capsys):
    data = tmp_path / "pairs.tsv"
    data.write_text("no tab here\nnor here\n", encoding="utf-8")
    out = tmp_path / "vocab"
    with pytest.raises(SystemExit) as exited:
        main(
            ["build-vocab", "--data", str(data), "--out", str(out), "--skip-malformed"]
        )
    assert exited.value.code == 2
    assert capsys.readouterr().err == (
        "keras-selfattn: error: No sentence pairs to learn the vocabularies from\n"
    )
    assert not (out / "tokenizer.json").exists()
