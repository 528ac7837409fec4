"""What is wrong with a line of a sentence-pair file, said once for both readers.

`corpus.read_pairs` (pairs in memory, Python) and `stream.pair_stream` (a tf.data
stream, in the graph) check the same rules and name a bad line the same way:
``FILE:LINE: problem: 'the line, cut at 60 characters'``. A line that is not
UTF-8 is shown with its undecodable bytes replaced, and the message says how to
convert the file.
"""

NO_TAB = "no tab character; expected 'source<TAB>target'"
EMPTY_SOURCE = "empty source (the text before the first tab)"
EMPTY_TARGET = "empty target (the text after the first tab)"
NOT_UTF8 = (
    "not valid UTF-8 (convert the file first, e.g. iconv -f LATIN1 -t UTF-8 "
    "FILE > FILE.utf8, with the file's real encoding)"
)
TOO_MANY_COLUMNS = "more than two tab-separated columns"
SHOWN_CHARACTERS = 60  # how much of a bad line a message shows


def shown_line(line: str) -> str:
    """The first `SHOWN_CHARACTERS` of a bad line, between single quotes (as the
    graph's reader shows it: no escapes, so both readers print the same line)."""
    return f"'{line[:SHOWN_CHARACTERS]}'"


def problem_message(path, line_number: int, problem: str, line: str) -> str:
    """``FILE:LINE: problem: 'line'``: one bad line, as both readers name it."""
    return f"{path}:{line_number}: {problem}: {shown_line(line)}"
