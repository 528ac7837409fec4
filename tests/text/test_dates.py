"""The bundled dates corpus: regenerates byte for byte, parses, is unambiguous."""

import collections
import datetime

import babel
import pytest
import tensorflow as tf
from babel.dates import format_date

from keras_selfattn.text import dates
from keras_selfattn.text.tokenizers import build_tokenizer


@pytest.fixture(scope="module")
def bundled():
    return dates.load_bundled_dates()


def test_bundled_file_regenerates_byte_for_byte():
    expected = dates.bundled_dates_path().read_bytes()
    regenerated = dates.format_dates_tsv()
    assert regenerated == expected, (
        "keras_selfattn/text/data/dates.tsv differs from generate_date_pairs(); CLDR "
        f"data comes from babel {babel.__version__} (constraints.txt pins 2.19.0). If "
        "the generator changed on purpose, run "
        "keras_selfattn.text.dates.write_bundled_dates()."
    )


def test_bundled_file_parses(bundled):
    assert len(bundled) == dates.DATES_NUM_PAIRS
    sources = [source for source, _ in bundled]
    assert len(set(sources)) == len(sources)  # so no source has two targets
    for _, target in bundled:
        parsed = datetime.date.fromisoformat(target)
        assert dates.DATES_FIRST_DATE <= parsed <= dates.DATES_LAST_DATE
        assert target == parsed.isoformat()


def test_sources_are_cldr_renderings_of_their_targets(bundled):
    # Spot-check: each of the first 300 sources is some style's rendering of its date.
    for source, target in bundled[:300]:
        date = datetime.date.fromisoformat(target)
        renderings = {
            " ".join(format_date(date, format=style, locale=locale).split())
            for locale, style in dates.DATES_STYLES
        }
        assert source in renderings


def test_styles_never_write_two_dates_the_same_way():
    # Every style over every day of 2012 (a leap year) plus each year's 5 March.
    days = [datetime.date(2012, 1, 1) + datetime.timedelta(n) for n in range(366)]
    days += [datetime.date(year, 3, 5) for year in range(1950, 2050)]
    written = collections.defaultdict(set)
    for locale, style in dates.DATES_STYLES:
        for day in days:
            written[
                " ".join(
                    format_date(day, format=style, locale=locale).split()
                ).casefold()
            ].add(day)
    assert not {text: ds for text, ds in written.items() if len(ds) > 1}


def test_corpus_mixes_locales_and_orders(bundled):
    sources = [source for source, _ in bundled]
    assert any(
        s.startswith(("Monday", "Tuesday", "Friday")) for s in sources
    )  # en, M d y
    assert any(s[:4].isdigit() and s[4] == "." for s in sources)  # hu, y. m d
    assert any(" de " in s for s in sources)  # es/pt, d de m de y
    assert (
        sum(
            "/" in s and s.count("/") == 2 and len(s.split("/")[2]) == 2
            for s in sources
        )
        > 0
    )


def test_recommended_tokenizers_lengths_and_vocab_sizes(bundled):
    sources = tf.constant([s for s, _ in bundled])
    targets = tf.constant([t for _, t in bundled])
    source = build_tokenizer(sources, dates.DATES_SOURCE_CONFIG)
    target = build_tokenizer(targets, dates.DATES_TARGET_CONFIG)
    assert (
        int(tf.reduce_max(source.encode(sources).row_lengths()))
        == dates.DATES_MAX_SOURCE_TOKENS
    )
    assert set(target.encode(targets).row_lengths().numpy().tolist()) == {10}
    assert source.vocab_size < 300
    assert target.vocab_size == 4 + 11  # reserved + 10 digits + "-"


def test_generator_is_deterministic_and_validates():
    a = dates.generate_date_pairs(50, seed=7)
    assert a == dates.generate_date_pairs(50, seed=7)
    assert a != dates.generate_date_pairs(50, seed=8)
    assert dates.generate_date_pairs(20) == dates.load_bundled_dates()[:20]
    with pytest.raises(ValueError, match="exceeds"):
        dates.generate_date_pairs(
            10,
            styles=[("fr", "long")],
            first_date=datetime.date(2000, 1, 1),
            last_date=datetime.date(2000, 1, 3),
        )
    with pytest.raises(ValueError, match="must not be before"):
        dates.generate_date_pairs(
            1, first_date=datetime.date(2000, 1, 2), last_date=datetime.date(2000, 1, 1)
        )
