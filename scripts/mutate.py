"""Mutation testing for one module, standard library only.

    python scripts/mutate.py gangopt/validation.py --tests tests/test_validation.py [more test files]
    python scripts/mutate.py gangopt/validation.py --list          # number and show every mutant
    python scripts/mutate.py gangopt/validation.py --tests ... --only 12 40

A *mutant* is the module with one small change (a comparison flipped, a constant off by one, a
statement dropped, ...; see :func:`mutants`). Each mutant is written, one at a time, into a copy of
the repository in a temporary directory (the working tree is never touched) and the given tests run
there. A mutant the tests fail on (or that hangs past ``--timeout``) is *killed*; one they pass on
*survives*, which means the tests would not notice that bug. Survivors are printed as
``file:line: original -> mutated``, then the score ``killed/total``.

Some mutants cannot be killed because they do not change behaviour (e.g. ``range(n + 1)`` ->
``range(n + 2)`` where the extra index is never reached). List those in ``--equivalent`` (default
``scripts/mutants-equivalent.txt``), one per line as printed, followed by ``  # reason``; they are
left out of the score. Mutants that give the same program as another one, or as the original, are
counted once, or not at all.
"""

from __future__ import annotations

import argparse
import ast
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from queue import Queue

REPO = Path(__file__).resolve().parent.parent
DEFAULT_EQUIVALENT = REPO / "scripts" / "mutants-equivalent.txt"
SKIP_DIRS = shutil.ignore_patterns(
    ".git", ".venv", "__pycache__", "*.egg-info", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".hypothesis"
)
"""Not copied: version control, the virtualenv, caches."""


# ----------------------------------------------------------------------------- mutation sites


@dataclass
class Mutant:
    """One change to the module: where, what it looked like, and how to make it."""

    line: int
    original: str
    mutated: str
    apply: Callable[[], None]
    """Changes the parsed tree the mutant was found in (once)."""

    def describe(self, path: str) -> str:
        original, mutated = _shorten(self.original, self.mutated)
        return f"{path}:{self.line}: {original} -> {mutated}"


NEGATED: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.GtE,
    ast.GtE: ast.Lt,
    ast.Gt: ast.LtE,
    ast.LtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
}
BOUNDARY: dict[type[ast.cmpop], type[ast.cmpop]] = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt}
"""Strict <-> non-strict: the off-by-one at a bound."""
SWAPPED: dict[type[ast.operator], type[ast.operator]] = {ast.Add: ast.Sub, ast.Sub: ast.Add}


def _text(node: ast.AST) -> str:
    """Source of a node on one line (the first line of a compound statement)."""
    return ast.unparse(node).splitlines()[0]


def _shorten(original: str, mutated: str, context: int = 25, limit: int = 80) -> tuple[str, str]:
    """Both texts cut to the part around their first difference, for one-line reports."""
    same = next((i for i, (a, b) in enumerate(zip(original, mutated, strict=False)) if a != b), 0)
    start = max(0, same - context)
    cut = [("..." if start else "") + text[start:] for text in (original, mutated)]
    return tuple(t if len(t) <= limit else t[: limit - 3] + "..." for t in cut)  # type: ignore[return-value]


def _set(node: ast.AST, field: str, value: object) -> tuple[str, Callable[[], None]]:
    """The text of ``node`` with ``field`` set to ``value``, and the function that sets it."""
    old = getattr(node, field)
    setattr(node, field, value)
    text = _text(node)
    setattr(node, field, old)
    return text, lambda: setattr(node, field, value)


def _put(parent: ast.AST, field: str, index: int | None, new: ast.AST) -> Callable[[], None]:
    """The function that puts ``new`` in place of the child ``parent.field[index]`` (or ``parent.field``)."""

    def apply() -> None:
        if index is None:
            setattr(parent, field, new)
        else:
            getattr(parent, field)[index] = new

    return apply


def _children(node: ast.AST) -> Iterator[tuple[str, int | None, ast.AST]]:
    """Child nodes with their place in ``node``; type annotations are skipped (never run)."""
    for field, value in ast.iter_fields(node):
        if field in ("annotation", "returns"):
            continue
        if isinstance(value, list):
            for i, child in enumerate(value):
                if isinstance(child, ast.AST):
                    yield field, i, child
        elif isinstance(value, ast.AST):
            yield field, None, value


def mutants(tree: ast.AST) -> list[Mutant]:
    """Every mutant of ``tree`` (depth first, so in source order within a statement)."""
    found: list[Mutant] = []

    def visit(node: ast.AST) -> None:
        for field, index, child in _children(node):
            found.extend(_mutants_of(child, node, field, index))
            visit(child)

    visit(tree)
    return found


def _mutants_of(node: ast.AST, parent: ast.AST, field: str, index: int | None) -> Iterator[Mutant]:
    """The mutants of one node, which is ``parent.field[index]`` (or ``parent.field``)."""
    line = getattr(node, "lineno", getattr(parent, "lineno", 0))

    def mutant(change: tuple[str, Callable[[], None]]) -> Mutant:
        text, apply = change
        return Mutant(line, _text(node), text, apply)

    def replaced_by(new: ast.AST, text: str | None = None) -> Mutant:
        return mutant((text or _text(new), _put(parent, field, index, new)))

    if isinstance(node, ast.Compare):  # a < b -> a >= b (negated), a < b -> a <= b (boundary)
        for i, op in enumerate(node.ops):
            for table in (NEGATED, BOUNDARY):
                if type(op) in table:
                    ops = [*node.ops[:i], table[type(op)](), *node.ops[i + 1 :]]
                    yield mutant(_set(node, "ops", ops))
    elif isinstance(node, ast.BoolOp):  # and <-> or
        yield mutant(_set(node, "op", ast.Or() if isinstance(node.op, ast.And) else ast.And()))
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):  # not x -> x
        yield replaced_by(node.operand)
    elif isinstance(node, ast.BinOp) and type(node.op) in SWAPPED:  # + <-> -
        yield mutant(_set(node, "op", SWAPPED[type(node.op)]()))
    elif isinstance(node, ast.AugAssign):  # x += y -> x -= y, and x += y -> x = y
        if type(node.op) in SWAPPED:
            yield mutant(_set(node, "op", SWAPPED[type(node.op)]()))
        yield replaced_by(ast.Assign(targets=[node.target], value=node.value, lineno=node.lineno))
    elif isinstance(node, ast.Constant) and isinstance(node.value, bool):  # True <-> False
        yield mutant(_set(node, "value", not node.value))
    elif isinstance(node, ast.Constant) and isinstance(node.value, int | float):  # n -> n + 1, n - 1, 0
        for value in dict.fromkeys((node.value + 1, node.value - 1, 0)):
            if value != node.value:
                yield mutant(_set(node, "value", value))
    elif isinstance(node, ast.If | ast.IfExp | ast.While):  # condition forced True / False
        for forced in (True, False):
            yield mutant(_set(node, "test", ast.Constant(value=forced)))
        if isinstance(node, ast.If) and node.orelse:  # (without an else, "condition False" is this)
            yield mutant(("body dropped", lambda: setattr(node, "body", [ast.Pass()])))
    elif isinstance(node, ast.comprehension) and node.ifs:  # [x for x in xs if c] -> [x for x in xs]
        yield mutant(_set(node, "ifs", []))
    elif isinstance(node, ast.Return) and node.value is not None and not _is_none(node.value):
        yield mutant(_set(node, "value", None))  # return x -> return (removing it would be the same)
    elif isinstance(node, ast.Continue | ast.Break | ast.Return) or (
        isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)  # out.append(v), c.update(x), ...
    ):
        yield replaced_by(ast.Pass(), "statement removed")


def _is_none(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def mutated_source(source: str, number: int) -> str:
    """``source`` with mutant ``number`` (an index into :func:`mutants`) applied."""
    tree = ast.parse(source)  # a fresh tree: the mutant changes it in place
    mutants(tree)[number].apply()
    return ast.unparse(ast.fix_missing_locations(tree))


def describe(found: list[Mutant], path: str) -> list[str]:
    """One line per mutant; a line that repeats an earlier one gets ``(2)``, ``(3)``, ..."""
    seen: dict[str, int] = {}
    out = []
    for mutant in found:
        text = mutant.describe(path)
        seen[text] = seen.get(text, 0) + 1
        out.append(text if seen[text] == 1 else f"{text} ({seen[text]})")
    return out


# ----------------------------------------------------------------------------- running the tests


@dataclass
class Outcome:
    number: int
    killed: bool
    how: str
    """"tests failed", "timeout" or "survived"."""
    seconds: float


def copy_repository(into: Path) -> Path:
    """A copy of the working tree (sources, tests, data) in ``into``; returns its root."""
    root = into / "repo"
    shutil.copytree(REPO, root, ignore=SKIP_DIRS)
    return root


def run_tests(root: Path, tests: list[str], timeout: float) -> tuple[bool, str, float]:
    """Runs the tests in the copy at ``root`` (its ``gangopt`` imported first); returns whether
    they passed, how they ended, and how long they took. A run past ``timeout`` is killed with
    all its children and counts as failed."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    command = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *tests]
    start = time.monotonic()
    proc = subprocess.Popen(
        command, cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    try:
        code = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the session holds pytest and anything it started
        proc.wait()
        return False, "timeout", time.monotonic() - start
    return code == 0, "passed" if code == 0 else "tests failed", time.monotonic() - start


def imported_module(root: Path, module: str) -> str:
    """The file Python imports ``module`` from in the copy (to check it is the copy's)."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    code = f"import {module} as m; print(m.__file__)"
    done = subprocess.run([sys.executable, "-c", code], cwd=root, env=env, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def run_mutant(root: Path, target: str, source: str, number: int, tests: list[str], timeout: float) -> Outcome:
    """Writes mutant ``number`` over ``target`` in the copy, runs the tests, restores the file."""
    path = root / target
    for cached in (path.parent / "__pycache__").glob(f"{path.stem}.*.pyc"):
        cached.unlink()  # a stale .pyc of the same size and second would be imported instead
    path.write_text(mutated_source(source, number), encoding="utf-8")
    try:
        passed, how, seconds = run_tests(root, tests, timeout)
    finally:
        path.write_text(source, encoding="utf-8")
    return Outcome(number, not passed, "survived" if passed else how, seconds)


# ----------------------------------------------------------------------------- equivalent mutants


def read_equivalent(path: Path) -> dict[str, str]:
    """Known-equivalent mutants: ``description -> reason`` from lines ``description  # reason``
    (descriptions as the survivors are printed); blank lines and lines starting with # are skipped."""
    if not path.exists():
        return {}
    out: dict[str, str] = {}
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        description, sep, reason = line.rpartition("  # ")
        if not sep or not reason.strip():
            raise SystemExit(f"{path}:{n}: expected 'path:line: original -> mutated  # reason'")
        out[description.strip()] = reason.strip()
    return out


# ----------------------------------------------------------------------------- command line


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("target", help="module to mutate, relative to the repository root")
    parser.add_argument("--tests", nargs="+", default=[], help="test files to run against each mutant")
    parser.add_argument("--list", action="store_true", help="only list the mutants, numbered")
    parser.add_argument("--only", nargs="+", type=int, default=None, metavar="N", help="run only these mutants")
    parser.add_argument("--jobs", type=int, default=1, help="mutants run at once (default 1: cores are shared)")
    parser.add_argument("--timeout", type=float, default=None, help="seconds per mutant (default: 5x the clean run)")
    parser.add_argument("--equivalent", type=Path, default=DEFAULT_EQUIVALENT, help="known-equivalent mutants")
    args = parser.parse_args(argv)

    target = Path(args.target).resolve().relative_to(REPO).as_posix()
    source = (REPO / target).read_text(encoding="utf-8")
    found = mutants(ast.parse(source))
    described = describe(found, target)
    if args.list:
        for number, text in enumerate(described):
            print(f"[{number}] {text}")
        return 0
    if not args.tests:
        parser.error("--tests is required (unless --list)")
    equivalent = read_equivalent(args.equivalent)
    numbers = args.only if args.only is not None else range(len(found))
    numbers = [n for n in numbers if described[n] not in equivalent]

    with tempfile.TemporaryDirectory(prefix="mutate-") as tmp:
        copies: Queue[Path] = Queue()
        for job in range(max(1, args.jobs)):
            copies.put(copy_repository(Path(tmp) / str(job)))
        root = copies.get()
        where = imported_module(root, target.removesuffix(".py").replace("/", "."))
        if not Path(where).resolve().is_relative_to(root.resolve()):
            raise SystemExit(f"the copy imports {where}, not its own {target}: is the package installed non-editable?")
        passed, how, seconds = run_tests(root, args.tests, timeout=3600)
        if not passed:
            raise SystemExit(f"the tests fail ({how}) without any mutation: fix them first")
        copies.put(root)
        timeout = args.timeout or max(30.0, 5 * seconds)
        print(f"{len(numbers)} mutants of {target} ({len(found) - len(numbers)} skipped); clean run {seconds:.1f}s")

        def one(number: int) -> Outcome:
            copy = copies.get()
            try:
                return run_mutant(copy, target, source, number, args.tests, timeout)
            finally:
                copies.put(copy)

        killed = 0
        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            for outcome in pool.map(one, numbers):
                killed += outcome.killed
                if not outcome.killed:
                    print(f"survived [{outcome.number}] {described[outcome.number]}", flush=True)
                elif outcome.how == "timeout":
                    print(f"timeout  [{outcome.number}] {described[outcome.number]} (counted as killed)", flush=True)

    stale = sorted(set(equivalent) - set(described))
    for text in stale:
        print(f"warning: {args.equivalent.name} lists {text}, which is no mutant of {target} (any more)")
    print(f"score: {killed}/{len(numbers)} killed ({len(equivalent) - len(stale)} known-equivalent mutants excluded)")
    return 0 if killed == len(numbers) else 1


if __name__ == "__main__":
    sys.exit(main())
