"""history.csv: rows keyed by step, written atomically, read back."""

from keras_selfattn.run_directory.history import (
    append_history,
    history_columns,
    history_with_steps,
    read_history,
    write_history,
)

OLD_HISTORY = (
    "epoch,loss,val_example_1,val_loss\n"
    '0,3.0,"a, b => c (reference: d)",2.9\n'
    "1,2.5,,nan\n"
    "2,2.4,x,2.2\n"
)


def test_history_rows_are_keyed_by_step_with_text_cells_kept(tmp_path):
    path = tmp_path / "history.csv"
    append_history(path, {"loss": 3.0, "step": 4, "epoch": 0, "a": "x, y"})
    append_history(path, {"val_loss": 2.0, "loss": 2.5, "step": 8})
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "step,epoch,a,loss,val_loss"  # the key first, then sorted
    assert lines[1:] == ['4,0,"x, y",3.0,', "8,,,2.5,2.0"]  # a new column: added
    rows = read_history(path)
    assert [row["step"] for row in rows] == ["4", "8"] and rows[0]["a"] == "x, y"
    assert not list(tmp_path.glob("tmp-*"))  # written under a temporary name
    columns = history_columns(rows)
    assert columns["step"] == [4.0, 8.0] and columns["loss"] == [3.0, 2.5]
    assert "a" not in columns  # text
    assert columns["val_loss"][1] == 2.0 and columns["val_loss"][0] != 2.0  # NaN


def test_an_old_epoch_keyed_history_gets_its_steps_from_the_plan(tmp_path):
    path = tmp_path / "history.csv"
    path.write_text(OLD_HISTORY + "x,1.0,,nan\n", encoding="utf-8")
    rows = read_history(path)
    assert "step" not in rows[0]
    keyed = history_with_steps(rows, lambda periods: periods * 5)
    assert [row["step"] for row in keyed] == [5, 10, 15, ""]  # "x": no epoch
    assert "step" not in rows[0]  # copied, not changed
    write_history(path, keyed[:3])
    again = read_history(path)
    assert path.read_text().splitlines()[0].startswith("step,epoch,")
    assert [row["step"] for row in again] == ["5", "10", "15"]
    assert again[0]["val_example_1"] == "a, b => c (reference: d)"
    # A file with steps already keeps them.
    assert history_with_steps(again, lambda p: -1) == again


def test_no_history_reads_as_no_rows(tmp_path):
    assert read_history(tmp_path / "history.csv") == []
    assert history_columns([]) == {}
