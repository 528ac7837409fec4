"""A run's ``history.csv``: a row per validation period, keyed by the steps trained.

Rows are dicts of strings; the file is rewritten whole, atomically, when a row is
added (a column the file lacks is added to every row).
"""

import csv
import math
import pathlib

from keras_selfattn.run_directory.atomic import replace_atomically
from keras_selfattn.run_directory.damaged import read_run_file

HISTORY_STEP = "step"  # history.csv's key and first column: the steps trained
# Keras' period (its "epoch") from 0, the key of the files written before the step
HISTORY_PERIOD = "epoch"


def read_history(path):
    """The rows of ``history.csv`` (dicts of strings), oldest first; [] without it.

    A run written before the rows were keyed by step has no ``step`` column
    (its rows are keyed by ``epoch``, Keras' period from 0): `history_with_steps`
    adds it.

    Raises:
        RunFileDamaged: the file is not CSV text.
    """
    path = pathlib.Path(path)
    if not path.exists():
        return []

    def read(name):
        with open(name, newline="", encoding="utf-8") as handle:
            return list(csv.DictReader(handle))

    return read_run_file(path, read)


def history_with_steps(rows, step_after):
    """``rows`` with a ``step`` in each: the rows of a run written before history
    was keyed by step get ``step_after(epoch + 1)`` (the run's
    ``StepPlan.step_after``); a row with neither a step nor an epoch number gets
    an empty step. The rows are copied, not changed."""
    kept = []
    for row in rows:
        row = dict(row)
        if not row.get(HISTORY_STEP):
            epoch = row.get(HISTORY_PERIOD) or ""
            row[HISTORY_STEP] = step_after(int(epoch) + 1) if epoch.isdigit() else ""
        kept.append(row)
    return kept


def write_history(path, rows):
    """Writes ``rows`` (dicts) as ``history.csv``, atomically (a temporary file
    renamed onto it): the columns ``step``, ``epoch``, then the others sorted;
    a cell a row lacks stays empty."""
    path = pathlib.Path(path)
    names = set().union(*rows) if rows else set()
    keys = [name for name in (HISTORY_STEP, HISTORY_PERIOD) if name in names]
    header = keys + sorted(names - set(keys))

    def write(tmp):
        with open(tmp, "w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(
                handle, fieldnames=header, restval="", lineterminator="\n"
            )
            writer.writeheader()
            writer.writerows(rows)

    return replace_atomically(write, path)


def append_history(path, row):
    """Adds ``row`` (a dict) to ``history.csv`` (created if absent; rewritten whole
    by `write_history`, so a column the file lacks is added to every row)."""
    return write_history(path, [*read_history(path), row])


def history_columns(rows):
    """The numeric columns of history rows: name -> list of floats (an empty cell
    is NaN); text columns (the validation examples) are left out."""
    columns = {}
    for name in rows[0] if rows else ():
        try:
            columns[name] = [float(row.get(name) or math.nan) for row in rows]
        except ValueError:
            continue
    return columns
