"""A line of a sentence-pair file: its format, its problems and how it is parsed.

The one definition of a line that both pair readers use: `corpus.iter_pairs`
(Python, a line at a time) and `stream.pair_stream` (``tf.data``, a batch of
lines at a time in the graph) parse with `parse_line` and `parse_lines`, which
apply the same rules in the same order and name a bad line in the same words.

A line holds one pair, ``source<TAB>target``; further tab-separated columns are
ignored (the Tatoeba/Anki format of the d2l book's ``fra.txt``, whose third
column is an attribution). It is UTF-8 (a byte-order mark is allowed on line 1)
and ends in ``\\n`` or ``\\r\\n``. A blank line (ASCII whitespace only) is
skipped; each side is stripped of the ASCII whitespace around it (`SPACE`: a
no-break space stays, so the pairs read in Python equal the pairs streamed, and
their fingerprints too).

Its problems, checked in this order (`problem_message` names one):
``FILE:LINE: problem: 'the line, cut at 60 characters'``: not UTF-8 (shown with
its undecodable bytes replaced, and the message says how to convert the file),
no tab, an empty source, an empty target; and, where the reader is asked to be
strict, more than two columns.
"""

import tensorflow as tf

__all__ = [
    "EMPTY_SOURCE",
    "EMPTY_TARGET",
    "NOT_UTF8",
    "NO_TAB",
    "SHOWN_CHARACTERS",
    "SPACE",
    "TOO_MANY_COLUMNS",
    "decode_line",
    "parse_line",
    "parse_lines",
    "problem_message",
    "shown_line",
]

NO_TAB = "no tab character; expected 'source<TAB>target'"
EMPTY_SOURCE = "empty source (the text before the first tab)"
EMPTY_TARGET = "empty target (the text after the first tab)"
NOT_UTF8 = (
    "not valid UTF-8 (convert the file first, e.g. iconv -f LATIN1 -t UTF-8 "
    "FILE > FILE.utf8, with the file's real encoding)"
)
TOO_MANY_COLUMNS = "more than two tab-separated columns"
SHOWN_CHARACTERS = 60  # how much of a bad line a message shows
# What a line and its sides are stripped of: ASCII whitespace, as
# tf.strings.strip strips it.
SPACE = " \t\n\v\f\r"
_BOM = b"\xef\xbb\xbf"


def shown_line(line: str) -> str:
    """The first `SHOWN_CHARACTERS` of a bad line, between single quotes (as the
    graph's parse shows it: no escapes, so both readers print the same line)."""
    return f"'{line[:SHOWN_CHARACTERS]}'"


def problem_message(path, line_number: int, problem: str, line: str) -> str:
    """``FILE:LINE: problem: 'line'``: one bad line, as both readers name it."""
    return f"{path}:{line_number}: {problem}: {shown_line(line)}"


def decode_line(raw: bytes, line_number: int, path) -> str:
    """A line's bytes as text without its line end (a BOM allowed on line 1).

    Raises:
        ValueError: the line is not UTF-8 (`problem_message`, `NOT_UTF8`).
    """
    encoding = "utf-8-sig" if line_number == 1 else "utf-8"
    try:
        line = raw.decode(encoding)
    except UnicodeDecodeError:
        shown = raw.decode(encoding, errors="replace").rstrip("\r\n")
        raise ValueError(problem_message(path, line_number, NOT_UTF8, shown)) from None
    return line.rstrip("\r\n")


def parse_line(line: str) -> tuple[tuple[str, str] | None, str | None]:
    """``((source, target), None)`` of a decoded, non-blank line, or ``(None, the
    problem)``."""
    if "\t" not in line:
        return None, NO_TAB
    source, target = (side.strip(SPACE) for side in line.split("\t")[:2])
    if not source:
        return None, EMPTY_SOURCE
    if not target:
        return None, EMPTY_TARGET
    return (source, target), None


def parse_lines(names, numbers, lines, strict_columns=False):
    """`parse_line` of a batch of raw lines, in the graph.

    Args:
        names, numbers, lines: each line's file name, its number in the file
            (from 1) and its bytes without ``\\n`` (`tf.string`, `tf.int64`,
            `tf.string` vectors).
        strict_columns: a line of more than two columns is a problem.

    Returns:
        ``(source, target, blank, problem, message, extra)``: the stripped sides,
        whether the line is blank, its problem ("" for none) and
        `problem_message` of it, and whether it has more than two columns (and
        is otherwise well formed).
    """
    has_bom = (numbers == 1) & tf.equal(tf.strings.substr(lines, 0, 3), _BOM)
    lines = tf.where(
        has_bom,
        tf.strings.regex_replace(lines, "^\\x{FEFF}", "", replace_global=False),
        lines,
    )
    lines = tf.strings.regex_replace(lines, "\r$", "", replace_global=False)
    replaced = tf.strings.unicode_transcode(
        lines, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD
    )
    valid_utf8 = tf.equal(replaced, lines)
    safe = tf.where(valid_utf8, lines, "")
    blank = valid_utf8 & tf.equal(tf.strings.strip(safe), "")
    columns = tf.strings.split(safe, "\t")
    has_tab = columns.row_lengths() >= 2
    too_many = columns.row_lengths() > 2
    padded = columns.to_tensor(default_value="", shape=[None, 2])
    source = tf.strings.strip(padded[:, 0])
    target = tf.strings.strip(padded[:, 1])
    problem = _problem(valid_utf8, has_tab, source, target, columns, strict_columns)
    problem = tf.where(blank, "", problem)
    # a line that is not UTF-8 is shown with its bad bytes replaced
    shown = tf.strings.substr(
        tf.where(valid_utf8, lines, replaced), 0, SHOWN_CHARACTERS, unit="UTF8_CHAR"
    )
    message = tf.strings.join(
        [names, ":", tf.strings.as_string(numbers), ": ", problem, ": '", shown, "'"]
    )
    extra = too_many & ~blank & tf.equal(problem, "")
    return source, target, blank, problem, message, extra


def _problem(valid_utf8, has_tab, source, target, columns, strict_columns):
    """What is wrong with each line, in this module's words, or ""."""
    too_many = columns.row_lengths() > 2
    return tf.where(
        ~valid_utf8,
        NOT_UTF8,
        tf.where(
            ~has_tab,
            NO_TAB,
            tf.where(
                tf.equal(source, ""),
                EMPTY_SOURCE,
                tf.where(
                    tf.equal(target, ""),
                    EMPTY_TARGET,
                    tf.where(
                        too_many & strict_columns,
                        tf.strings.join(
                            [
                                TOO_MANY_COLUMNS + " (",
                                tf.strings.as_string(columns.row_lengths()),
                                "); expected 'source<TAB>target' (strict_columns)",
                            ]
                        ),
                        "",
                    ),
                ),
            ),
        ),
    )
