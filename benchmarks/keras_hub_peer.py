"""The KerasHub Transformer peer: trained on a CPU budget, scored after.

The recipe a Keras user copies first (keras.io "English-to-Spanish translation
with KerasHub", scaled to `--preset small`'s size; shared/peers/
keras-hub-transformer.md): WordPiece vocabularies from
``keras_hub.tokenizers.compute_word_piece_vocabulary`` (8,000 asked, reserved
[PAD] [UNK] [START] [END], cased), ``TokenAndPositionEmbedding`` (64 positions,
256 wide) and dropout 0.1 a side, 3 ``TransformerEncoder`` + 3
``TransformerDecoder`` blocks (FFN 1024, 4 heads, dropout 0.1, post-layer-norm:
keras-hub's defaults), ``Dense`` logits; sequences cut at 64 tokens; batches of
64 pairs shuffled over the whole training set each epoch and bucketed by length
(boundaries 17/25/33/41/65, padded to the boundary); label-smoothed (0.1)
cross-entropy over the non-padding targets; Adam(0.9, 0.98, 1e-9) at
1e-3 * min(step / 800, sqrt(800 / step)); no XLA; ``--threads`` intra- and
inter-op threads (default 1). It needs keras-hub and tensorflow-text (the
``peer`` extra; its own venv in shared/peers/keras-hub-transformer.md).

Training CPU time is ``resource.getrusage`` of this process (user + system)
from just before ``model.fit``, minus the CPU of the snapshots' own saves;
vocabulary learning and tokenization are not counted, and nothing is evaluated
while training. When it first passes each ``--budgets`` CPU-minute mark the
weights are saved (``OUT/budget-<minutes>.weights.h5``, steps and CPU times in
``OUT/budgets.json``, the training loss every 100 steps in ``OUT/cpu_log.csv``);
training stops after the last budget (or ``--max-steps``). Then every snapshot
translates ``--test`` (``keras_hub.samplers.GreedySampler`` with the decoder's
self- and cross-attention key/value cache, at most 64 tokens; ``--beam 4`` with
``BeamSampler``), detokenized (WordPiece detokenize, then punctuation and
hyphens re-attached: the round trip of the raw references is printed), and is
scored with sacrebleu (BLEU and chrF, cased, default tokenization, against the
raw references), plus BLEU as the Multi30k papers compute it with ``--tok-ref``
(lowercased, Moses-normalized and -tokenized, against the dataset's
``*.lc.norm.tok.de``: shared/tools/paper_bleu.py's pipeline).

    peer-venv/bin/python benchmarks/keras_hub_peer.py --train train.en-de.tsv \\
        --test test_2016_flickr.en-de.tsv --tok-ref test_2016_flickr.lc.norm.tok.de \\
        --out runs/peer --budgets 15,30,60 --beam 1,4
    peer-venv/bin/python benchmarks/keras_hub_peer.py --out runs/peer --score-only \\
        --train train.en-de.tsv --test test_2016_flickr.en-de.tsv  # rescore
    peer-venv/bin/python benchmarks/keras_hub_peer.py --quick  # smoke test

``--quick``: a few steps of a tiny model on a slice of the bundled dates TSV
(or ``--train``), scored on 8 pairs; checks that the script runs, not figures.
Pair files are ``source<TAB>target``: a line is split at its first tab (so a
tab inside the target, as in Multi30k's train.de:7366, stays in the target).
"""

import argparse
import json
import os
import pathlib
import re
import resource
import sys

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
import _bench  # paper_bleu

QUICK_DATA = REPO / "keras_selfattn" / "text" / "data" / "dates.tsv"
RESERVED = ["[PAD]", "[UNK]", "[START]", "[END]"]
PAD, START, END = 0, 2, 3
BOUNDARIES = [17, 25, 33, 41, 65]
FULL = {"width": 256, "heads": 4, "ffn": 1024, "layers": 3, "vocab": 8000}
QUICK = {"width": 32, "heads": 2, "ffn": 64, "layers": 1, "vocab": 300}


def process_cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def read_pairs(path, limit=None):
    """(source, target) pairs of a TSV file, split at the first tab."""
    pairs = []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            source, _, target = line.rstrip("\n").partition("\t")
            pairs.append((source, target))
            if limit and len(pairs) >= limit:
                break
    return pairs


def learn_vocabularies(pairs, size):
    import keras_hub
    import tensorflow as tf

    vocabularies = []
    for side in (0, 1):
        texts = tf.data.Dataset.from_tensor_slices([p[side] for p in pairs]).batch(1000)
        vocabularies.append(
            keras_hub.tokenizers.compute_word_piece_vocabulary(
                texts, vocabulary_size=size, lowercase=False, reserved_tokens=RESERVED
            )
        )
    return vocabularies


def tokenizers(vocabularies):
    import keras_hub

    return [
        keras_hub.tokenizers.WordPieceTokenizer(vocabulary=v, lowercase=False)
        for v in vocabularies
    ]


def token_ids(tokenizer, texts):
    """A RaggedTensor of int32 ids (an eager keras-hub tokenizer gives lists)."""
    import tensorflow as tf

    return tf.ragged.constant(tokenizer(texts), dtype=tf.int32)


def training_dataset(pairs, tokenizer_pair, seed, batch_size=64, max_len=64):
    """Shuffled each epoch, length-bucketed, repeated ((source, decoder in), label)."""
    import tensorflow as tf

    sources = token_ids(tokenizer_pair[0], [p[0] for p in pairs])[:, :max_len]
    targets = token_ids(tokenizer_pair[1], [p[1] for p in pairs])[:, : max_len - 1]
    starts = tf.fill([targets.nrows(), 1], START)
    ends = tf.fill([targets.nrows(), 1], END)
    decoder_in = tf.concat([tf.cast(starts, targets.dtype), targets], axis=1)
    labels = tf.concat([targets, tf.cast(ends, targets.dtype)], axis=1)
    data = tf.data.Dataset.range(len(pairs))
    data = data.shuffle(len(pairs), seed=seed, reshuffle_each_iteration=True)
    data = data.map(lambda i: (sources[i], decoder_in[i], labels[i]))
    data = data.bucket_by_sequence_length(
        lambda s, d, _: tf.maximum(tf.shape(s)[0], tf.shape(d)[0]),
        bucket_boundaries=BOUNDARIES,
        bucket_batch_sizes=[batch_size] * (len(BOUNDARIES) + 1),
        pad_to_bucket_boundary=True,
    )
    data = data.map(lambda s, d, l: ((tf.cast(s, "int32"), tf.cast(d, "int32")), l))
    return data.repeat().prefetch(2)


class Peer:
    """The model's layers, kept apart for the cached decoding."""

    def __init__(self, source_vocab, target_vocab, dims, max_len=64):
        import keras
        import keras_hub

        hub = keras_hub.layers
        self.dims, self.max_len = dims, max_len
        self.source_embedding = hub.TokenAndPositionEmbedding(
            source_vocab, max_len, dims["width"]
        )
        self.target_embedding = hub.TokenAndPositionEmbedding(
            target_vocab, max_len, dims["width"]
        )
        self.dropouts = [keras.layers.Dropout(0.1), keras.layers.Dropout(0.1)]
        self.encoders = [
            hub.TransformerEncoder(dims["ffn"], dims["heads"], dropout=0.1)
            for _ in range(dims["layers"])
        ]
        self.decoders = [
            hub.TransformerDecoder(dims["ffn"], dims["heads"], dropout=0.1)
            for _ in range(dims["layers"])
        ]
        self.logits = keras.layers.Dense(target_vocab)
        source = keras.Input((None,), dtype="int32")
        decoder_in = keras.Input((None,), dtype="int32")
        memory, source_mask = self.encode(source)
        target_mask = keras.ops.not_equal(decoder_in, PAD)
        x = self.dropouts[1](self.target_embedding(decoder_in))
        for block in self.decoders:
            x = block(
                x,
                memory,
                decoder_padding_mask=target_mask,
                encoder_padding_mask=source_mask,
            )
        self.model = keras.Model([source, decoder_in], self.logits(x))

    def encode(self, source):
        import keras

        mask = keras.ops.not_equal(source, PAD)
        x = self.dropouts[0](self.source_embedding(source))
        for block in self.encoders:
            x = block(x, padding_mask=mask)
        return x, mask

    def generate(self, source, sampler):
        """Token ids (batch, max_len + 1) from [START]: the sampler with the cache."""
        import keras
        import tensorflow as tf

        ops = keras.ops
        memory, mask = self.encode(source)
        batch, length = tf.shape(source)[0], tf.shape(source)[1]
        heads = self.dims["heads"]
        head_dim = self.dims["width"] // heads
        self_shape = [batch, 2, self.max_len + 1, heads, head_dim]
        cross_shape = [batch, 2, length, heads, head_dim]
        x = self.target_embedding(tf.fill([batch, 1], START))
        self_caches, cross_caches = [], []
        for block in self.decoders:  # the cross-attention keys and values, once
            x, self_cache, cross_cache = block(
                x,
                memory,
                encoder_padding_mask=mask,
                self_attention_cache=tf.zeros(self_shape),
                self_attention_cache_update_index=0,
                cross_attention_cache=tf.zeros(cross_shape),
                cross_attention_cache_update_index=0,
            )
            self_caches.append(self_cache)
            cross_caches.append(cross_cache)
        cache = (
            ops.stack(self_caches, axis=1),
            ops.stack(cross_caches, axis=1),
            memory,
            ops.cast(mask, "float32"),
        )
        prompt = tf.concat(
            [tf.fill([batch, 1], START), tf.zeros([batch, self.max_len], "int32")], 1
        )
        return sampler(
            self.next_token,
            prompt,
            cache=cache,
            index=1,
            mask=tf.not_equal(prompt, PAD),
            stop_token_ids=[END],
        )

    def next_token(self, prompt, cache, index):
        """The sampler's ``next``: logits at ``index`` from the token before it."""
        import keras

        ops = keras.ops
        self_cache, cross_cache, memory, mask = cache
        x = self.target_embedding(
            ops.slice(prompt, [0, index - 1], [ops.shape(prompt)[0], 1]),
            start_index=index - 1,
        )
        updated = []
        for i, block in enumerate(self.decoders):
            x, layer_cache, _ = block(
                x,
                memory,
                encoder_padding_mask=ops.greater(mask, 0.5),
                self_attention_cache=self_cache[:, i],
                self_attention_cache_update_index=index - 1,
                cross_attention_cache=cross_cache[:, i],
                cross_attention_cache_update_index=None,
            )
            updated.append(layer_cache)
        logits = self.logits(x)[:, 0, :]
        return logits, None, (ops.stack(updated, axis=1), cross_cache, memory, mask)


class Schedule:
    """1e-3 * min(step / 800, sqrt(800 / step)), steps counted from 1."""

    def __new__(cls, peak=1e-3, warmup=800):
        import keras

        class _Schedule(keras.optimizers.schedules.LearningRateSchedule):
            def __call__(self, step):
                step = keras.ops.cast(step, "float32") + 1.0
                return peak * keras.ops.minimum(
                    step / warmup, keras.ops.sqrt(warmup / step)
                )

            def get_config(self):
                return {}

        return _Schedule()


def smoothed_loss(labels, logits, smoothing=0.1):
    """Label-smoothed cross-entropy, averaged over the non-padding labels."""
    import keras

    ops = keras.ops
    labels = ops.cast(labels, "int32")
    vocab = ops.shape(logits)[-1]
    target = ops.one_hot(labels, vocab) * (1.0 - smoothing) + smoothing / vocab
    cross_entropy = -ops.sum(target * ops.log_softmax(logits, axis=-1), axis=-1)
    mask = ops.cast(ops.not_equal(labels, PAD), "float32")
    return ops.sum(cross_entropy * mask) / ops.maximum(ops.sum(mask), 1.0)


def budget_callback(out, budgets, max_steps, log_every=100):
    """Saves the weights at each training-CPU budget (minutes); stops after the last."""
    import keras

    class BudgetSnapshots(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.start = process_cpu()
            self.excluded, self.step, self.rows = 0.0, 0, []
            self.pending = sorted(budgets)
            self.log = out / "cpu_log.csv"
            self.log.write_text("step,train_cpu_s,loss\n")

        def on_train_batch_end(self, batch, logs=None):
            self.step += 1
            now = process_cpu()
            train_cpu = now - self.start - self.excluded
            if self.step % log_every == 0:
                loss = float((logs or {}).get("loss", float("nan")))
                with open(self.log, "a", encoding="utf-8") as log:
                    log.write(f"{self.step},{train_cpu:.1f},{loss:.4f}\n")
            while self.pending and train_cpu >= self.pending[0] * 60:
                self.snapshot(f"{self.pending.pop(0):g}", train_cpu, now)
            if self.pending and max_steps and self.step >= max_steps:
                self.snapshot("end", train_cpu, now)
                self.pending = []
            if not self.pending:
                self.model.stop_training = True

        def snapshot(self, name, train_cpu, now):
            path = out / f"budget-{name}.weights.h5"
            self.model.save_weights(path)
            self.excluded += process_cpu() - now
            row = {
                "budget": name,
                "step": self.step,
                "train_cpu_s": round(train_cpu, 1),
            }
            self.rows.append({**row, "weights": path.name})
            (out / "budgets.json").write_text(json.dumps(self.rows, indent=1))
            print(f"snapshot {row}", flush=True)

    return BudgetSnapshots()


def build(args, pairs):
    """(Peer, tokenizers): vocabularies learned (or read from OUT) and the model."""
    import time

    out, dims = pathlib.Path(args.out), QUICK if args.quick else FULL
    files = [out / "vocab.en.txt", out / "vocab.de.txt"]
    if all(f.exists() for f in files):
        vocabularies = [f.read_text(encoding="utf-8").split("\n") for f in files]
    else:
        start, cpu = time.perf_counter(), process_cpu()
        vocabularies = learn_vocabularies(pairs, dims["vocab"])
        for f, v in zip(files, vocabularies, strict=True):
            f.write_text("\n".join(v), encoding="utf-8")
        print(
            f"vocabularies {len(vocabularies[0])} / {len(vocabularies[1])} pieces in "
            f"{time.perf_counter() - start:.0f} s ({process_cpu() - cpu:.0f} CPU-s)",
            flush=True,
        )
    pair = tokenizers(vocabularies)
    peer = Peer(len(vocabularies[0]), len(vocabularies[1]), dims)
    return peer, pair


def train(args, peer, pair, pairs):
    import keras

    out = pathlib.Path(args.out)
    keras.utils.set_random_seed(args.seed)
    data = training_dataset(pairs, pair, args.seed)
    optimizer = keras.optimizers.Adam(Schedule(), beta_1=0.9, beta_2=0.98, epsilon=1e-9)
    peer.model.compile(optimizer=optimizer, loss=smoothed_loss, jit_compile=False)
    print(f"{peer.model.count_params():,} parameters", flush=True)
    budgets = [float(b) for b in args.budgets.split(",")]
    callback = budget_callback(out, budgets, args.max_steps)
    peer.model.fit(
        data, epochs=1, steps_per_epoch=10**7, callbacks=[callback], verbose=0
    )


def detokenize(text):
    """WordPiece's detokenized text with punctuation and hyphens re-attached."""
    text = re.sub(r" ([.,!?;:)\]}%])", r"\1", text)
    text = re.sub(r"([(\[{]) ", r"\1", text)
    text = re.sub(r" ?([-/'’]) ?", r"\1", text)
    text = re.sub(r'" (.*?) "', r'"\1"', text)
    return text.strip()


def translate(peer, pair, sources, beam, batch_size=64):
    import keras_hub
    import tensorflow as tf

    sampler = (
        keras_hub.samplers.GreedySampler()
        if beam == 1
        else keras_hub.samplers.BeamSampler(num_beams=beam)
    )
    generate = tf.function(
        lambda ids: peer.generate(ids, sampler),
        input_signature=[tf.TensorSpec([None, None], tf.int32)],
    )
    ids = token_ids(pair[0], sources)[:, : peer.max_len]
    lengths = ids.row_lengths().numpy()
    order = sorted(range(len(sources)), key=lambda i: lengths[i])
    rows = {}
    for start in range(0, len(order), batch_size):
        chosen = order[start : start + batch_size]
        batch = tf.gather(ids, chosen).to_tensor()
        tokens = generate(tf.cast(batch, tf.int32)).numpy()
        for i, row in zip(chosen, tokens, strict=True):
            row = list(row[1:])
            row = row[: row.index(END)] if END in row else row
            rows[i] = [int(t) for t in row]
    texts = pair[1].detokenize([rows[i] for i in range(len(sources))])
    return [detokenize(t) for t in texts]


def score(args, peer, pair):
    from sacrebleu.metrics import BLEU, CHRF

    out = pathlib.Path(args.out)
    test = read_pairs(args.test, 8 if args.quick else None)
    sources, references = [p[0] for p in test], [p[1] for p in test]
    round_trip = [detokenize(t) for t in pair[1].detokenize(pair[1](references))]
    print(
        "round trip of the references (tokenize, detokenize): BLEU "
        f"{BLEU().corpus_score(round_trip, [references]).score:.2f}"
    )
    lines = [
        "| peer snapshot (train CPU-min) | step | search | BLEU | chrF | paper BLEU |",
        "|---|---|---|---|---|---|",
    ]
    for row in json.loads((out / "budgets.json").read_text()):
        if args.only and row["budget"] not in args.only.split(","):
            continue
        peer.model.load_weights(out / row["weights"])
        for beam in [int(b) for b in args.beam.split(",")]:
            hypotheses = translate(peer, pair, sources, beam)
            stem = pathlib.Path(args.test).stem
            (out / f"{row['weights']}.{stem}.beam{beam}.hyp").write_text(
                "\n".join(hypotheses) + "\n", encoding="utf-8"
            )
            bleu = BLEU().corpus_score(hypotheses, [references]).score
            chrf = CHRF().corpus_score(hypotheses, [references]).score
            paper = (
                f"{_bench.paper_bleu(hypotheses, args.tok_ref):.2f}"
                if args.tok_ref
                else ""
            )
            search = "greedy" if beam == 1 else f"beam {beam}"
            lines.append(
                f"| {row['budget']} ({row['train_cpu_s'] / 60:.1f}) | {row['step']:,} "
                f"| {search} | {bleu:.1f} | {chrf:.1f} | {paper} |"
            )
            print(lines[-1], flush=True)
    print("\n".join(lines))


def parse(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--train", help="training pairs (TSV)")
    parser.add_argument("--test", help="test pairs (TSV)")
    parser.add_argument("--tok-ref", help="the test set's lc.norm.tok references")
    parser.add_argument("--out", help="output directory")
    parser.add_argument("--budgets", default="15,30,60", help="training CPU-minutes")
    parser.add_argument("--max-steps", type=int, default=0, help="0: no limit")
    parser.add_argument("--beam", default="1", help="e.g. 1,4")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--score-only", action="store_true")
    parser.add_argument("--only", help="score only these budgets, e.g. 15,60")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        import tempfile

        args.train = args.train or str(QUICK_DATA)
        args.test = args.test or args.train
        args.out = args.out or tempfile.mkdtemp(prefix="keras_hub_peer_")
        args.budgets, args.max_steps, args.beam = "100", 3, "1,2"
    elif not (args.train and args.test and args.out):
        parser.error("--train, --test and --out are required (or --quick)")
    return args


def main(argv=None):
    args = parse(argv)
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    pathlib.Path(args.out).mkdir(parents=True, exist_ok=True)
    pairs = read_pairs(args.train, 256 if args.quick else None)
    peer, pair = build(args, pairs)
    if not args.score_only:
        train(args, peer, pair, pairs)
    score(args, peer, pair)
    quick = " --quick" if args.quick else ""
    print(f"command: .venv/bin/python benchmarks/keras_hub_peer.py{quick}")


if __name__ == "__main__":
    sys.exit(main())
