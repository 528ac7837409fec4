"""The package's functions stay short: at most 60 lines, or a reason beside them;
its modules stay readable: at most two over 500 lines, none over 700.

(Complexity is ruff's C901, max 10, in pyproject.toml; line length is ruff's E501.)
A function over 60 lines carries a one-line comment saying why, either on the line
above its ``def`` (``# Long: ...``) or on the ``def`` line itself.
"""

import ast
import pathlib

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "keras_selfattn"
LONGEST = 60


def long_functions_without_a_reason():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        lines = path.read_text().splitlines()
        for node in ast.walk(ast.parse("\n".join(lines))):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            if node.end_lineno - node.lineno + 1 <= LONGEST:
                continue
            first = (
                node.decorator_list[0].lineno if node.decorator_list else node.lineno
            )
            above, line = lines[first - 2].strip(), lines[node.lineno - 1]
            if not (above.startswith("# Long:") or "# long" in line.lower()):
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name}")
    return found


def test_no_function_is_long_without_a_reason():
    assert long_functions_without_a_reason() == []


def module_lengths():
    """``{module path: line count}`` of every module of the package."""
    return {
        str(path.relative_to(PACKAGE)): len(path.read_text().splitlines())
        for path in sorted(PACKAGE.rglob("*.py"))
    }


def test_modules_stay_readable():
    """A module past 500 lines holds more than one idea: split it by idea. Two
    may be long (a public layer and its docstring), none past 700."""
    lengths = module_lengths()
    assert len(lengths) > 50, "the package's modules were not found"
    long = {name: n for name, n in lengths.items() if n > 500}
    assert len(long) <= 2, long
    assert max(lengths.values()) <= 700, max(lengths.items(), key=lambda kv: kv[1])
