"""docs/serving.md's "Loading the export in Python" snippet, run as written in a
fresh interpreter that never imports keras_selfattn."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "serving.md"
MARKER = "<!-- load-export-snippet -->"


def doc_snippet():
    """The fenced Python block right after the marker in docs/serving.md."""
    text = DOC.read_text(encoding="utf-8")
    found = re.search(re.escape(MARKER) + r"\s*```python\n(.*?)```", text, re.DOTALL)
    assert found, f"no python block after {MARKER} in {DOC}"
    return found.group(1)


def test_snippet_is_four_lines_loading_the_documented_path():
    lines = [line for line in doc_snippet().splitlines() if line.strip()]
    assert len(lines) == 4
    assert lines[1].startswith("import tensorflow_text")
    assert '"exports/m/1"' in lines[2]


@pytest.mark.slow
def test_snippet_runs_as_written(text_export, tmp_path):
    shutil.copytree(text_export, tmp_path / "exports" / "m" / "1")
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run(
        [sys.executable, "-I", "-c", doc_snippet()],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "'translation'" in done.stdout and "'score'" in done.stdout
    assert "keras_selfattn" not in done.stderr
