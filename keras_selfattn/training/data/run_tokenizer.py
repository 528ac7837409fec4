"""A run's tokenizers (`TrainConfig` options): read from a vocabulary or learned."""

from keras_selfattn import text
from keras_selfattn.run_directory.layout import TOKENIZER_CONFIG_FILE
from keras_selfattn.text.learn_vocab import learn_pair_tokenizer
from keras_selfattn.text.sentencepiece_model import read_sentencepiece_model
from keras_selfattn.training.data import run_data as run_data_lib

__all__ = ["load_or_learn_tokenizer", "tokenizer_configs"]


def tokenizer_configs(train_config):
    """The source and target `TokenizerConfig` of a `TrainConfig`.

    A SentencePiece model file a side names is read here first, so that a
    missing or broken file fails before any data is read, with the option and
    the path in the message.
    """

    def config(side, make=text.TokenizerConfig):
        model = getattr(train_config, f"{side}_sentencepiece_model")
        if model is not None:
            read_sentencepiece_model(model, f"--{side}-sentencepiece-model")
        return make(
            kind=getattr(train_config, f"{side}_tokenizer"),
            ops=train_config.tokenizer_ops,
            split_digits=train_config.split_digits,
            sentencepiece_model=model,
            max_vocab_size=getattr(train_config, f"{side}_vocab_size"),
        )

    # The target keeps its case and Unicode form: text comes back as written.
    return config("source"), config("target", text.TokenizerConfig.for_target)


def load_or_learn_tokenizer(vocab, work_dir, resuming, run_data, train_config):
    """The run's `PairTokenizer`, saved into ``work_dir``.

    Resuming: the one the run saved. Else from ``vocab`` (a `jobs.build_vocab`
    directory or a run directory; its tokenizer options must be the run's), or
    learned from the first ``vocab_sample_lines`` training pairs.
    """
    if resuming and (work_dir / TOKENIZER_CONFIG_FILE).exists():
        return text.PairTokenizer.load(work_dir)
    wanted = tokenizer_configs(train_config)
    if vocab is not None:
        tokenizer = text.PairTokenizer.load(vocab)
        for side, config, expected in zip(
            ("source", "target"),
            (tokenizer.source.config, tokenizer.target.config),
            wanted,
            strict=True,
        ):
            for name in ("kind", "ops", "split_digits"):
                if getattr(config, name) != getattr(expected, name):
                    raise ValueError(
                        f"The {side} vocabulary in {vocab} was built with {name}="
                        f"{getattr(config, name)!r}, but this run asks for "
                        f"{getattr(expected, name)!r}; pass the same tokenizer options"
                    )
            model_file = expected.sentencepiece_model
            if model_file is not None and read_sentencepiece_model(
                model_file, f"--{side}-sentencepiece-model"
            ) != (getattr(tokenizer, side).sentencepiece_model):
                raise ValueError(
                    f"The {side} vocabulary in {vocab} is not the SentencePiece model "
                    f"{model_file} that this run names (--{side}-sentencepiece-"
                    "model); pass one or the other"
                )
    else:
        tokenizer = learn_pair_tokenizer(
            run_data_lib.training_pairs(run_data, train_config),
            *wanted,
            sample_lines=train_config.vocab_sample_lines,
        )
    tokenizer.save(work_dir)
    return tokenizer
