"""benchmarks/RESULTS.md is the one home of the benchmark figures: at most 600 lines,
every section cited elsewhere exists, and the package's docstrings cite a section
by name instead of repeating its figures (which go stale when it is rerun)."""

import ast
import pathlib
import re

REPO = pathlib.Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "RESULTS.md"
MAX_LINES = 600

# A benchmark figure: a speed ratio (0.81x, 1.3-3x), a duration, a throughput, a
# score, or a share of a measured time.
FIGURE = re.compile(
    r"\b\d+(?:\.\d+)?(?:-\d+(?:\.\d+)?)?x\b"
    r"|\b\d[\d,.]*\s*(?:ms|CPU-s|CPU-seconds|GFLOP/s|MB of text)\b"
    r"|\b\d[\d,.]*\s*(?:sentences|target tokens|tokens|steps)/s\b"
    r"|\b(?:BLEU|chrF)\s+(?:of\s+)?\d"
    r"|\b\d+(?:-\d+)?%\s+(?:more|less|cheaper|faster|dearer|slower"
    r"|of\s+(?:(?:its|the|a|an)\s+)?(?:[\w'-]+\s+){0,3}(?:time|step)\b)"
)

# Docstrings another change is rewriting now; each still carries figures.


def _headings():
    return [
        line.lstrip("#").strip()
        for line in RESULTS.read_text(encoding="utf-8").splitlines()
        if line.startswith("#")
    ]


def _docstrings(path):
    """``(line, docstring)`` of a module and of its classes and functions."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(
            node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
        ):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                yield (node.body[0].lineno, doc)


def _figures(text):
    return FIGURE.findall(" ".join(text.split()))


def test_the_figure_pattern_finds_figures_and_spares_settings():
    for figure in (
        "the step costs 0.81x float32's",
        "oneDNN runs 1.5-3x slower",
        "took 8 ms for the rows",
        "about 470 MB of text a second",
        "BLEU 25.1 against 16.3",
        "40% of a bfloat16 export's op time",
        "about 30%\n   faster under XLA",
        "418 sentences/s",
    ):
        assert _figures(figure), figure
    for setting in (
        "cosine decay to 5% at the last step",
        "a file cut at 10%, 50%, 90% or 99.9% of its bytes",
        "defaults (5000 pairs at 10% each)",
        "the shape (2, 5, 32) of 0x1F",
        'benchmarks/RESULTS.md, "Step cost"',
    ):
        assert not _figures(setting), setting


def test_docstrings_cite_results_sections_instead_of_figures():
    found = []
    for path in sorted((REPO / "keras_selfattn").rglob("*.py")):
        name = path.relative_to(REPO).as_posix()
        for line, doc in _docstrings(path):
            found += [f"{name}:{line}: {f}" for f in _figures(doc)]
    assert not found, (
        "cite the benchmarks/RESULTS.md section by name instead: " + "; ".join(found)
    )


def test_results_is_at_most_600_lines():
    assert len(RESULTS.read_text(encoding="utf-8").splitlines()) <= MAX_LINES


# `RESULTS.md, "Step cost"`, `RESULTS.md ("Each change alone")`, `RESULTS.md](...),
# "Large data"` and a list: `RESULTS.md, "A" and "B"`.
CITATION = re.compile(
    r"RESULTS\.md(?:\]\([^)]*\))?\)?[,:]?\s*\(?((?:\"[^\"]+\"(?:,\s*|\s+and\s+)?)+)"
)


def _citations():
    """``(file, cited section)`` across the README, docs/, the package and the
    benchmarks; a comment's ``#`` markers and line breaks are joined away."""
    files = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    files += sorted((REPO / "keras_selfattn").rglob("*.py"))
    files += sorted((REPO / "benchmarks").glob("*.py"))
    for path in files:
        text = re.sub(r"\n\s*#\s?", " ", path.read_text(encoding="utf-8"))
        text = " ".join(text.split())
        for group in CITATION.findall(text):
            for section in re.findall(r"\"([^\"]+)\"", group):
                yield path.relative_to(REPO).as_posix(), section


def test_every_cited_section_exists():
    headings = [h.lower() for h in _headings()]
    cited = list(_citations())
    assert len(cited) > 20, cited  # the pattern reads the citations
    missing = [
        f"{name}: {section!r}"
        for name, section in cited
        if not any(h.startswith(section.lower()) for h in headings)
    ]
    assert not missing, missing


def test_every_section_the_benchmarks_readme_maps_exists():
    readme = (REPO / "benchmarks" / "README.md").read_text(encoding="utf-8")
    rows = [line for line in readme.splitlines() if line.startswith("| `")]
    sections = [re.findall(r"\"([^\"]+)\"", row)[-1] for row in rows]
    assert sections
    headings = [h.lower() for h in _headings()]
    for section in sections:
        assert any(h.startswith(section.lower()) for h in headings), section
