"""The bundled corpus: dates written out in eight languages -> ISO 8601 dates.

Each pair is a calendar date between 1950-01-01 and 2049-12-31 written the way
CLDR (through `babel.dates.format_date`) writes it in one locale and style, and
the same date as ``YYYY-MM-DD``::

    Tuesday, March 5, 2024           2024-03-05     en, full   (month day year)
    5 de mar. de 2024                2024-03-05     pt, medium (day month year)
    2024. márc. 5.                   2024-03-05     hu, medium (year month day)
    05.03.24                         2024-03-05     de, short  (two-digit year)

The locales (en, fr, de, es, it, pt, nl, hu) put day, month and year in three
different orders, name months and weekdays in eight languages, and the numeric
"short" styles use two-digit years (50-99 -> 19xx, 00-49 -> 20xx): a model must
look at the right source positions to write each output digit, which is the
point of attention. Every source maps to exactly one date: the "short" styles of
es and it (d/M/yy, dd/MM/yy) are left out because they collide with en's M/d/yy
(3/5/24 is March 5 in English, 3 May in Spanish).

Tokenize the sources as words with one token per digit and the targets as
characters (`DATES_SOURCE_CONFIG`, `DATES_TARGET_CONFIG`): sources are at most
`DATES_MAX_SOURCE_TOKENS` tokens, targets exactly 10 characters, vocabularies of
about 200 and 15 tokens (reserved ones included; a digit glued to the one
before it is a token of its own, "￭5", so the source has both "5" and "￭5").

The generator is deterministic (Python's `random.Random(seed)` and CLDR data of
the pinned babel version): `generate_date_pairs()` with the defaults reproduces
the bundled ``data/dates.tsv`` byte for byte (`format_dates_tsv`).
"""

import datetime
import importlib.resources
import pathlib
import random
from collections.abc import Sequence

from keras_selfattn.text import corpus
from keras_selfattn.text.tokenizers import TokenizerConfig

__all__ = [
    "DATES_FIRST_DATE",
    "DATES_LAST_DATE",
    "DATES_MAX_SOURCE_TOKENS",
    "DATES_NUM_PAIRS",
    "DATES_SEED",
    "DATES_SOURCE_CONFIG",
    "DATES_STYLES",
    "DATES_TARGET_CONFIG",
    "bundled_dates_path",
    "format_dates_tsv",
    "generate_date_pairs",
    "load_bundled_dates",
    "load_pairs",
    "write_bundled_dates",
]

DATES_FIRST_DATE = datetime.date(1950, 1, 1)
DATES_LAST_DATE = datetime.date(2049, 12, 31)
DATES_NUM_PAIRS = 30_000
DATES_SEED = 20240315
_LOCALES = ("en", "fr", "de", "es", "it", "pt", "nl", "hu")
# (locale, babel format) pairs; es/it "short" collide with en "short" (see above).
DATES_STYLES: tuple[tuple[str, str], ...] = tuple(
    (locale, style)
    for locale in _LOCALES
    for style in ("full", "long", "medium", "short")
    if not (style == "short" and locale in ("es", "it"))
)
# Recommended tokenizers: source words with one token per digit, target characters.
DATES_SOURCE_CONFIG = TokenizerConfig(kind="word", split_digits=True)
DATES_TARGET_CONFIG = TokenizerConfig.for_target(kind="char")
# Longest source under DATES_SOURCE_CONFIG ("quarta-feira, 15 de dezembro de 2024").
DATES_MAX_SOURCE_TOKENS = 13
_BUNDLED_NAME = "dates.tsv"


def _format_source(date: datetime.date, locale: str, style: str) -> str:
    from babel.dates import format_date

    text = format_date(date, format=style, locale=locale)
    # CLDR may use no-break spaces; a TSV is easier to read and diff without them.
    return " ".join(text.split())


def generate_date_pairs(
    num_pairs: int = DATES_NUM_PAIRS,
    *,
    seed: int = DATES_SEED,
    styles: Sequence[tuple[str, str]] = DATES_STYLES,
    first_date: datetime.date = DATES_FIRST_DATE,
    last_date: datetime.date = DATES_LAST_DATE,
) -> list[tuple[str, str]]:
    """Generates distinct (written date, ISO date) pairs, deterministically.

    Each pair draws a date uniformly from ``[first_date, last_date]`` and a
    ``(locale, style)`` uniformly from `styles`; a source already drawn is drawn
    again, so sources are distinct. The same arguments give the same pairs in the
    same order (for the same babel/CLDR version).

    Args:
        num_pairs: number of pairs.
        seed: seed of the `random.Random` that draws dates and styles.
        styles: ``(locale, format)`` pairs for `babel.dates.format_date`; format
            is "full", "long", "medium", "short" or a CLDR pattern. Choose styles
            that never write two dates the same way.
        first_date: earliest date (inclusive).
        last_date: latest date (inclusive). Keep the range within 100 years when a
            style has two-digit years.

    Returns:
        List of ``(source, "YYYY-MM-DD")`` pairs.

    Example:

    >>> generate_date_pairs(2, seed=1, styles=[("fr", "long")])
    [('9 février 1974', '1974-02-09'), ('8 octobre 1995', '1995-10-08')]
    """
    num_days = _checked_day_count(num_pairs, styles, first_date, last_date)
    styles = [tuple(style) for style in styles]
    rng = random.Random(seed)
    pairs: list[tuple[str, str]] = []
    seen: set[str] = set()
    attempts = 0
    while len(pairs) < num_pairs:
        attempts += 1
        if attempts > 20 * num_pairs + 1000:
            raise ValueError(
                f"could not draw {num_pairs} distinct sources: the styles write too "
                "many dates the same way"
            )
        date = first_date + datetime.timedelta(days=rng.randrange(num_days))
        locale, style = styles[rng.randrange(len(styles))]
        source = _format_source(date, locale, style)
        if source in seen:
            continue
        seen.add(source)
        pairs.append((source, date.isoformat()))
    return pairs


def _checked_day_count(num_pairs, styles, first_date, last_date):
    """The days in ``[first_date, last_date]``, once the arguments are checked."""
    if num_pairs < 0:
        raise ValueError(f"num_pairs must be >= 0. Received: num_pairs={num_pairs}")
    if not styles:
        raise ValueError("styles must name at least one (locale, format) pair")
    num_days = (last_date - first_date).days + 1
    if num_days < 1:
        raise ValueError(
            "last_date must not be before first_date. "
            f"Received: first_date={first_date}, last_date={last_date}"
        )
    if num_pairs > num_days * len(styles):
        raise ValueError(
            f"num_pairs={num_pairs} exceeds the {num_days * len(styles)} distinct "
            "(date, style) combinations"
        )
    return num_days


def format_dates_tsv(pairs: Sequence[tuple[str, str]] | None = None) -> bytes:
    """The TSV bytes of `pairs` (default: `generate_date_pairs()`, the bundled file).

    Args:
        pairs: pairs to format; `None` generates the bundled corpus.

    Returns:
        UTF-8 bytes, one ``source<TAB>target`` line per pair, ``\\n`` line ends.

    Example:

    >>> format_dates_tsv([("5 mars 2024", "2024-03-05")])
    b'5 mars 2024\\t2024-03-05\\n'
    """
    if pairs is None:
        pairs = generate_date_pairs()
    return "".join(f"{source}\t{target}\n" for source, target in pairs).encode("utf-8")


def bundled_dates_path() -> pathlib.Path:
    """Path of the bundled ``dates.tsv`` inside the installed package.

    Returns:
        A `pathlib.Path` to an existing file.

    Example:

    >>> bundled_dates_path().name
    'dates.tsv'
    """
    path = pathlib.Path(
        str(importlib.resources.files("keras_selfattn.text") / "data" / _BUNDLED_NAME)
    )
    if not path.is_file():
        raise FileNotFoundError(
            f"The bundled corpus is missing: {path}. Reinstall keras-selfattn, or "
            "regenerate it: keras_selfattn.text.dates.write_bundled_dates()"
        )
    return path


def load_bundled_dates() -> list[tuple[str, str]]:
    """Reads the bundled dates corpus (`DATES_NUM_PAIRS` pairs, no download).

    Returns:
        List of ``(source, "YYYY-MM-DD")`` pairs, in file order.

    Example:

    >>> pairs = load_bundled_dates()
    >>> len(pairs) == DATES_NUM_PAIRS
    True
    """
    return corpus.read_pairs(bundled_dates_path())


def write_bundled_dates(path: str | pathlib.Path | None = None) -> pathlib.Path:
    """Regenerates the bundled corpus file (maintainers: after changing the generator).

    Args:
        path: where to write; default: the package's ``data/dates.tsv``.

    Returns:
        The path written.
    """
    if path is None:
        path = pathlib.Path(__file__).resolve().parent / "data" / _BUNDLED_NAME
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(format_dates_tsv())
    return path


def load_pairs(data, max_pairs=None):
    """Pairs from a TSV path, a list of pairs, or (``data`` None) the bundled corpus.

    Raises:
        ValueError: no pairs (naming ``data``).
    """
    if data is None:
        pairs = load_bundled_dates()
    elif isinstance(data, (str, pathlib.Path)):
        pairs = corpus.read_pairs(data)
    else:
        pairs = [tuple(pair) for pair in data]
    if not pairs:
        raise ValueError(f"No sentence pairs to train on. Received: data={data!r}")
    return pairs if max_pairs is None else pairs[:max_pairs]
