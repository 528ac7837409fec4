"""Trains the committed tiny runs the serving tests read (tests/serving/data/) and
writes only what their readers need (`tiny_runs.committed_files`).

    python -m tests.serving.make_tiny_runs

Run it when a test says a committed run no longer matches the code that reads it
(`tiny_runs.stale_reasons`: a changed run layout, a new or changed setting, a
model the loading code no longer reads), then commit tests/serving/data/. It
trains each run with `tiny_runs.train_tiny`'s settings (about 20 s each on two
cores).
"""

import pathlib
import shutil
import sys
import tempfile

from tests.serving import tiny_runs


def make_tiny_runs(names=tuple(tiny_runs.COMMITTED_RUNS), data_dir=tiny_runs.DATA_DIR):
    """Trains each committed run of ``names`` and replaces its folder in
    ``data_dir`` with the files `committed_files` names. Returns the folders."""
    written = []
    for name in names:
        with tempfile.TemporaryDirectory() as scratch:
            run_dir = tiny_runs.train_tiny(
                pathlib.Path(scratch) / name, **tiny_runs.COMMITTED_RUNS[name]
            )
            staged = pathlib.Path(scratch) / "staged"
            for relative in tiny_runs.committed_files(name):
                source = pathlib.Path(run_dir) / relative
                if not source.is_file():
                    raise FileNotFoundError(
                        f"training no longer writes {relative}: update "
                        "tiny_runs.committed_files"
                    )
                (staged / relative).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source, staged / relative)
            target = pathlib.Path(data_dir) / name
            shutil.rmtree(target, ignore_errors=True)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copytree(staged, target)
        reasons = tiny_runs.stale_reasons(name, target)
        if reasons:
            raise AssertionError(tiny_runs.stale_message(name, reasons))
        size = sum(p.stat().st_size for p in target.rglob("*") if p.is_file())
        print(f"{target}: {size / 1024:.0f} KiB", flush=True)
        written.append(target)
    return written


if __name__ == "__main__":
    make_tiny_runs(sys.argv[1:] or tuple(tiny_runs.COMMITTED_RUNS))
