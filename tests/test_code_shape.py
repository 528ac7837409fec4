"""The package's functions stay short: at most 60 lines, or a reason beside them.

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
