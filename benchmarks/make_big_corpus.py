"""Writes a synthetic sentence-pair corpus of any size, with realistic lengths.

Sources are sentences of 2 to 80 words (log-normal lengths, median about 11,
a long tail as in WMT/Tatoeba data), words drawn from a Zipf distribution over a
40,000-word vocabulary; the target is a deterministic function of the source
(each word mapped to another word, a few pairs of words swapped, a
one-in-four chance of a short extra word), so a model can learn it. Written in
chunks with NumPy: memory stays bounded at any size. Same seed, same file.

    python benchmarks/make_big_corpus.py --pairs 3000000 --out /tmp/big/3m.tsv
"""

import argparse
import gzip
import pathlib

import numpy as np

VOCAB = 40_000
CHUNK = 100_000


def _words(rng):
    syllables = [a + b for a in "bcdfghjklmnprstvz" for b in "aeiou"]
    pieces = rng.integers(0, len(syllables), size=(VOCAB, 4))
    sizes = rng.integers(1, 5, size=VOCAB)
    words, seen = [], set()
    for index, (row, size) in enumerate(zip(pieces, sizes, strict=True)):
        word = "".join(syllables[i] for i in row[:size])
        extra = index
        while word in seen:
            word += syllables[extra % len(syllables)]
            extra //= len(syllables)
            extra += 1
        seen.add(word)
        words.append(word)
    return np.array(words, dtype=object)


def write_corpus(path, pairs, seed=0):
    """Writes ``pairs`` lines of ``source<TAB>target`` to ``path`` (``.gz``:
    compressed)."""
    rng = np.random.default_rng(seed)
    source_words = _words(rng)
    target_words = _words(rng)
    mapping = rng.permutation(VOCAB)
    ranks = np.arange(1, VOCAB + 1)
    zipf = 1.0 / ranks**1.1
    zipf /= zipf.sum()
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "wt", encoding="utf-8") as handle:
        for start in range(0, pairs, CHUNK):
            count = min(CHUNK, pairs - start)
            lengths = np.clip(
                np.round(rng.lognormal(np.log(11), 0.6, size=count)), 2, 80
            ).astype(int)
            ids = rng.choice(VOCAB, size=int(lengths.sum()), p=zipf)
            extra = rng.random(count) < 0.25
            lines = []
            offset = 0
            for length, add in zip(lengths, extra, strict=True):
                sentence = ids[offset : offset + length]
                offset += length
                target = mapping[sentence]
                if length > 3:  # swap the first two words: a little reordering
                    target = np.concatenate([target[1::-1], target[2:]])
                source_text = " ".join(source_words[sentence])
                target_text = " ".join(target_words[target])
                if add:
                    target_text += " " + target_words[int(sentence[0]) % 50]
                lines.append(f"{source_text}\t{target_text}\n")
            handle.write("".join(lines))
    return path


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, required=True)
    parser.add_argument("--out", required=True, help="file to write (.gz compresses)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.pairs < 1:
        parser.error(f"--pairs must be positive. Received: {args.pairs}")
    print(write_corpus(args.out, args.pairs, args.seed))


if __name__ == "__main__":
    main()
