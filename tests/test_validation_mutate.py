"""scripts/mutate.py, the mutation tester of the validator's tests (docs/testing.md): which
mutants it makes, and how it reads the list of equivalent ones."""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent

SOURCE = """\
def f(a: int, b: list[int]) -> int:
    if a < b[0] and not a:
        b.append(a)
    a += 1
    return a
"""


def _mutate() -> ModuleType:
    """scripts/ is not a package: load the script by path."""
    spec = importlib.util.spec_from_file_location("mutate", ROOT / "scripts" / "mutate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_every_kind_of_mutant_of_a_small_function() -> None:
    mutate = _mutate()
    found = mutate.describe(mutate.mutants(ast.parse(SOURCE)), "m.py")
    assert found == [
        "m.py:2: if a < b[0] and (not a): -> if True:",
        "m.py:2: if a < b[0] and (not a): -> if False:",
        "m.py:2: a < b[0] and (not a) -> a < b[0] or not a",
        "m.py:2: a < b[0] -> a >= b[0]",
        "m.py:2: a < b[0] -> a <= b[0]",
        "m.py:2: 0 -> 1",
        "m.py:2: 0 -> -1",
        "m.py:2: not a -> a",
        "m.py:3: b.append(a) -> statement removed",
        "m.py:4: a += 1 -> a -= 1",
        "m.py:4: a += 1 -> a = 1",
        "m.py:4: 1 -> 2",
        "m.py:4: 1 -> 0",
        "m.py:5: return a -> return",
    ]


def test_each_mutant_changes_the_program_one_way_and_leaves_the_rest() -> None:
    mutate = _mutate()
    count = len(mutate.mutants(ast.parse(SOURCE)))
    programs = [mutate.mutated_source(SOURCE, n) for n in range(count)]
    assert len(set(programs)) == count and ast.unparse(ast.parse(SOURCE)) not in programs
    assert "a -= 1" in programs[9] and "return a\n" not in programs[13]
    for program in programs:
        compile(program, "m.py", "exec")


def test_equivalent_mutants_need_a_reason(tmp_path: Path) -> None:
    mutate = _mutate()
    listed = tmp_path / "equivalent.txt"
    listed.write_text("# comment\n\nm.py:4: 1 -> 2  # a never reaches 3\n", encoding="utf-8")
    assert mutate.read_equivalent(listed) == {"m.py:4: 1 -> 2": "a never reaches 3"}
    listed.write_text("m.py:4: 1 -> 2\n", encoding="utf-8")
    with pytest.raises(SystemExit, match="reason"):
        mutate.read_equivalent(listed)
