"""Mutation testing for one module, standard library only.

    python scripts/mutate.py gangopt/validation.py --tests tests/test_validation.py [more test files]
    python scripts/mutate.py gangopt/validation.py --list          # number and show every mutant
    python scripts/mutate.py gangopt/validation.py --tests ... --only 12 40 [--fork] [--jobs 2]

A *mutant* is the module with one small change (a comparison flipped or negated, ``and``/``or``
swapped, ``not`` dropped, a constant moved by one or set to 0, ``True``/``False`` swapped, ``+``/``-``
swapped, an augmented assignment changed, an ``if`` condition forced or its body dropped, a
``continue``/``break``/``return`` or a call statement such as ``out.append(...)`` removed; see
:func:`_mutants_of`). Each mutant is written, one at a time, into a copy of the repository in a
temporary directory (the working tree is never touched) and the given tests run there with
``python -m pytest -x -q -p no:cacheprovider``, the copy first on the path. A mutant the tests
fail on (or that runs past ``--timeout``) is *killed*; one they pass on *survives*: the tests would
not notice that bug. Survivors are printed as ``file:line: original -> mutated``, then the score
``killed/total``.

Some mutants cannot be killed because they do not change behaviour (a cache disabled, a bound with
slack). List those in ``--equivalent`` (default ``tests/mutation-equivalents/<module>.txt``), one per line
as printed, followed by ``  # reason``; they are left out of the score.

``--fork`` runs pytest in forks of this process after importing, once, everything the tests import
from outside the copy (pytest, pydantic, numpy, ...): the same runs, about twice as fast.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import suppress
from dataclasses import dataclass
from dataclasses import field as default
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
EQUIVALENTS = REPO / "tests" / "mutation-equivalents"
"""Known-equivalent mutants of ``gangopt/<module>.py`` are listed in ``<module>.txt`` here."""
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

PYTEST = ["-x", "-q", "-p", "no:cacheprovider"]
WRONG_MODULE = 99
"""Exit code of a forked run that imported the module from outside its copy."""


@dataclass
class Run:
    """A test run in progress, in its own process group (so a timeout kills all it started)."""

    pid: int
    proc: subprocess.Popen[bytes] | None = None
    """The subprocess, in subprocess mode (it reaps its own child); None for a fork."""
    start: float = default(default_factory=time.monotonic)

    def poll(self) -> int | None:
        """The exit code, or None while it runs."""
        if self.proc is not None:
            return self.proc.poll()
        pid, status = os.waitpid(self.pid, os.WNOHANG)
        return None if pid == 0 else os.waitstatus_to_exitcode(status)

    def kill(self) -> None:
        os.killpg(self.pid, signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait()
        else:
            os.waitpid(self.pid, 0)


def start_subprocess(root: Path, tests: list[str], module: str) -> Run:
    """``python -m pytest -x -q -p no:cacheprovider TESTS`` in the copy, its ``gangopt`` first."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", *PYTEST, *tests],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    return Run(proc.pid, proc)


def start_fork(root: Path, tests: list[str], module: str) -> Run:
    """The same run as :func:`start_subprocess` via ``pytest.main`` in a fork of this process,
    which has already imported pytest and the third-party modules (see :func:`preload`): about a
    second less per mutant. The fork checks that it imported ``module`` from the copy."""
    pid = os.fork()
    if pid:
        return Run(pid)
    code = 3
    try:
        os.setsid()
        os.chdir(root)
        sys.path.insert(0, str(root))
        os.environ["PYTHONPATH"] = str(root)
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.dup2(null, 2)
        import pytest

        code = int(pytest.main([*PYTEST, *tests]))
        loaded = sys.modules.get(module)
        if loaded is not None and not Path(str(loaded.__file__)).resolve().is_relative_to(root.resolve()):
            code = WRONG_MODULE
    finally:
        os._exit(code)


def preload(root: Path, tests: list[str]) -> None:
    """Imports here every module that collecting the tests in the copy imports from outside it
    (pytest, pydantic, numpy, ...), so that forks start with them loaded."""
    script = (
        "import sys, pytest; pytest.main(['--co', '-q', '-p', 'no:cacheprovider', *sys.argv[1:]]);"
        f"print('\\n'.join(n for n, m in list(sys.modules.items()) if not str(getattr(m, '__file__', None))"
        f".startswith({str(root)!r})), file=sys.stderr)"
    )
    env = {**os.environ, "PYTHONPATH": str(root)}
    done = subprocess.run([sys.executable, "-c", script, *tests], cwd=root, env=env, capture_output=True, text=True)
    for name in done.stderr.splitlines():
        if name and name != "__main__":
            with suppress(Exception):  # private or platform modules that cannot be imported by name
                importlib.import_module(name)


def imported_module(root: Path, module: str) -> str:
    """The file Python imports ``module`` from in the copy (to check it is the copy's)."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    code = f"import {module} as m; print(m.__file__)"
    done = subprocess.run([sys.executable, "-c", code], cwd=root, env=env, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def copy_repository(into: Path) -> Path:
    """A copy of the working tree (sources, tests, data) in ``into``; returns its root."""
    root = into / "repo"
    shutil.copytree(REPO, root, ignore=SKIP_DIRS)
    return root


def write_module(root: Path, target: str, text: str) -> None:
    """Writes ``text`` as the copy's ``target``, dropping its cached bytecode (a stale .pyc of
    the same size and modification second would be imported instead)."""
    path = root / target
    for cached in (path.parent / "__pycache__").glob(f"{path.stem}.*.pyc"):
        cached.unlink()
    path.write_text(text, encoding="utf-8")


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
    parser.add_argument(
        "--equivalent",
        type=Path,
        default=None,
        help="known-equivalent mutants (default: tests/mutation-equivalents/<module>.txt)",
    )
    parser.add_argument(
        "--fork", action="store_true", help="run pytest in forks of a process that has imported its dependencies"
    )
    args = parser.parse_args(argv)

    target = Path(args.target).resolve().relative_to(REPO).as_posix()
    module = target.removesuffix(".py").replace("/", ".")
    source = (REPO / target).read_text(encoding="utf-8")
    described = describe(mutants(ast.parse(source)), target)
    if args.list:
        for number, text in enumerate(described):
            print(f"[{number}] {text}")
        return 0
    if not args.tests:
        parser.error("--tests is required (unless --list)")
    if args.equivalent is None:
        args.equivalent = EQUIVALENTS / f"{Path(target).stem}.txt"
    equivalent = read_equivalent(args.equivalent)
    wanted = args.only if args.only is not None else range(len(described))
    if any(not 0 <= n < len(described) for n in wanted):
        parser.error(f"--only: mutants are numbered 0 to {len(described) - 1} (see --list)")
    todo = [n for n in wanted if described[n] not in equivalent]

    with tempfile.TemporaryDirectory(prefix="mutate-") as tmp:
        free = [copy_repository(Path(tmp) / str(job)) for job in range(max(1, args.jobs))]
        where = imported_module(free[0], module)
        if not Path(where).resolve().is_relative_to(free[0].resolve()):
            raise SystemExit(f"the copy imports {where}, not its own {target}: is the package installed non-editable?")
        if args.fork:
            os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # no thread pools in the process that forks
            preload(free[0], args.tests)
        start = start_fork if args.fork else start_subprocess
        clean = start(free[0], args.tests, module)
        while (code := clean.poll()) is None:
            time.sleep(0.05)
        if code != 0:
            raise SystemExit(f"the tests fail (exit code {code}) without any mutation: fix them first")
        seconds = time.monotonic() - clean.start
        timeout = args.timeout or max(30.0, 5 * seconds)
        print(f"{len(todo)} mutants of {target} ({len(described) - len(todo)} skipped); clean run {seconds:.1f}s")

        killed, done = 0, 0
        running: dict[Path, tuple[int, Run]] = {}  # copy -> the mutant it holds, and its test run
        while todo or running:
            while todo and free:
                root, number = free.pop(), todo.pop(0)
                write_module(root, target, mutated_source(source, number))
                running[root] = (number, start(root, args.tests, module))
            time.sleep(0.05)
            for root, (number, run) in list(running.items()):
                code = run.poll()
                timed_out = code is None and time.monotonic() - run.start > timeout
                if code is None and not timed_out:
                    continue
                if timed_out:
                    run.kill()
                if code == WRONG_MODULE:
                    raise SystemExit(f"mutant {number}: the tests imported {module} from outside the copy")
                write_module(root, target, source)
                free.append(root)
                del running[root]
                done += 1
                killed += code != 0
                if code == 0:
                    print(f"survived [{number}] {described[number]}", flush=True)
                elif timed_out:
                    print(f"timeout  [{number}] {described[number]} (counted as killed)", flush=True)
                if done % 50 == 0:
                    print(f"... {done} run, {done - killed} survived", file=sys.stderr, flush=True)

    stale = sorted(set(equivalent) - set(described))
    for text in stale:
        print(f"warning: {args.equivalent.name} lists {text}, which is no mutant of {target} (any more)")
    total = done
    print(f"score: {killed}/{total} killed ({len(equivalent) - len(stale)} known-equivalent mutants excluded)")
    return 0 if killed == total else 1


if __name__ == "__main__":
    sys.exit(main())
