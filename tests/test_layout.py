"""The house rules of the package layout (issue 11), checked on the source itself.

- No import cycles between modules (imports under ``if TYPE_CHECKING:`` are types only and
  do not count: they never run).
- No module imports another module's underscore names.
- One registry of solver names: every name is accepted by the door, the CLI, the replays and
  the service's type, and nothing else keeps its own list.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import get_args

import networkx as nx
import pytest

import gangopt
from gangopt.cli import build_parser
from gangopt.replay.policies import POLICY_NAMES, make_policy
from gangopt.solvers import ALIASES, SOLVERS, SolverName, get_solver
from tests.builders import cluster, make_round, pending

PACKAGE = Path(gangopt.__file__).resolve().parent


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _runtime_imports(tree: ast.Module) -> list[ast.ImportFrom | ast.Import]:
    """Every import statement that runs (anywhere in the module), skipping TYPE_CHECKING blocks."""
    found: list[ast.ImportFrom | ast.Import] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def _graph() -> tuple[nx.DiGraph, list[tuple[str, str, str]]]:
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: nx.DiGraph = nx.DiGraph()
    graph.add_nodes_from(modules)
    private: list[tuple[str, str, str]] = []
    for name, path in modules.items():
        for node in _runtime_imports(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [(a.name, None) for a in node.names]
            else:
                assert node.level == 0, f"{name}: relative import"
                targets = [(f"{node.module}.{a.name}", a.name) for a in node.names]
            for full, imported in targets:
                module = full if full in modules else full.rsplit(".", 1)[0]
                if module in modules and module != name:
                    graph.add_edge(name, module)
                if imported and imported.startswith("_") and not imported.startswith("__") and module in modules:
                    private.append((name, module, imported))
    return graph, private


def test_no_import_cycles() -> None:
    graph, _ = _graph()
    assert list(nx.simple_cycles(graph)) == []


def test_no_module_imports_another_modules_underscore_names() -> None:
    _, private = _graph()
    assert private == []


def test_the_package_reads_as_the_pipeline() -> None:
    """contract -> round as arrays -> solvers -> judging -> door -> replay / k8s / service / cli:
    the solvers never import the door or the outer rooms, and the contract imports nothing else."""
    graph, _ = _graph()
    outer = ("gangopt.solve", "gangopt.replay", "gangopt.k8s", "gangopt.service", "gangopt.cli")

    def inside(module: str, rooms: tuple[str, ...]) -> bool:
        return any(module == room or module.startswith(room + ".") for room in rooms)

    for module in graph:
        if inside(module, ("gangopt.solvers",)):
            assert not [m for m in graph.successors(module) if inside(m, outer)], module
    for contract in ("gangopt.schema", "gangopt.checks", "gangopt.quantities", "gangopt.errors"):
        assert set(graph.successors(contract)) <= {
            "gangopt.schema",
            "gangopt.checks",
            "gangopt.quantities",
            "gangopt.errors",
        }, contract


def test_the_registry_types_and_aliases_agree() -> None:
    assert set(get_args(SolverName)) == set(SOLVERS)
    assert all(target in SOLVERS for target in ALIASES.values())
    assert all(spec.name == name for name, spec in SOLVERS.items())
    with pytest.raises(ValueError, match="known: cpsat, greedy"):
        get_solver("nope")


@pytest.mark.parametrize("name", [*SOLVERS, *ALIASES])
def test_every_registry_name_is_accepted_everywhere(name: str) -> None:
    """The door, the CLI's --solver, the replays' --policy all take every name."""
    rnd = make_round(cluster(2), pending=[pending("a", gpu=4), pending("b", gpu=8)])
    plan = gangopt.solve(rnd, solver=name)
    assert gangopt.validate(rnd, plan) == []
    assert plan.admitted, name
    assert build_parser().parse_args(["solve", "x.json", "--solver", name]).solver == name
    assert name in POLICY_NAMES
    replayed = make_policy(name)(rnd)
    assert replayed.admitted == plan.admitted


def test_commands_that_do_not_search_never_import_ortools_or_networkx(tmp_path: Path) -> None:
    """Importing OR-Tools (and the pandas its CP-SAT wrapper pulls in) costs about half a second
    of CPU, networkx 0.4 s (issue 13): validate, explain, schema, greedy and the peer emulations
    must not pay for them, not even for the LP bounds (only with ``--lp-bounds``, checked last
    in the same process: the round is one where they would run)."""
    import subprocess
    import sys

    from bench.rounds import fragmented_spec
    from gangopt.replay.generate import generate

    rnd, _ = generate(fragmented_spec(48, 16, busy=0.75, seed=3, running_mix="tilted"))
    round_file = tmp_path / "round.json"
    round_file.write_text(rnd.model_dump_json())
    plan = gangopt.solve(rnd, solver="greedy", annotate=False)
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(plan.model_dump_json())
    assert len(plan.admitted) < len(rnd.pending)  # some tier below its ceiling: the LPs would run
    r, p = str(round_file), str(plan_file)
    runs = [["validate", r, p], ["explain", r, p], ["schema"]]
    runs += [["solve", r, "--solver", name] for name in SOLVERS if name != "cpsat"]
    script = (
        "import sys, contextlib, io\n"
        "from gangopt.cli import main\n"
        "def heavy():\n"
        "    return sorted(m for m in sys.modules if m.split('.')[0] in ('ortools', 'networkx', 'pandas'))\n"
        f"for argv in {runs!r}:\n"
        "    with contextlib.redirect_stdout(io.StringIO()):\n"
        "        assert main(argv) == 0, argv\n"
        "    assert not heavy(), (argv, heavy())\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    assert main(['solve', {r!r}, '--solver', 'greedy', '--lp-bounds']) == 0\n"
        "assert 'ortools.linear_solver.pywraplp' in sys.modules, heavy()\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr


def test_cpsat_imports_cp_sat_only_when_it_builds_a_model(tmp_path: Path) -> None:
    """CP-SAT's Python wrapper pulls in pandas: 0.3 CPU-s of the fragmented M round's 1.5 end to
    end (issue 13). A round whose answer the cheap bounds prove (here greedy's plan, no model)
    must not pay for it; the linear solver the bounds use is enough. Nor for the replay's
    generator (``generate``), the summary (``--explain``) or the search's child process: 66 M
    of the 1,971 M instructions of this solve end to end."""
    import subprocess
    import sys

    from bench.rounds import fragmented_text

    round_file = tmp_path / "round.json"
    round_file.write_text(fragmented_text("S", 0.75))
    script = (
        "import sys, contextlib, io, json\n"
        "from gangopt.cli import main\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out):\n"
        f"    assert main(['solve', {str(round_file)!r}]) == 0\n"
        "plan = json.loads(out.getvalue())\n"
        "assert 'no model' in plan['message'], plan['message']\n"
        "assert 'ortools.linear_solver.pywraplp' in sys.modules\n"
        "heavy = sorted(m for m in sys.modules if m.startswith(('ortools.sat', 'pandas')))\n"
        "assert not heavy, heavy\n"
        # Nor the modules of other commands and of the search's child (issue 13, fixed costs).
        "unused = ('gangopt.replay', 'gangopt.explain', 'gangopt.solvers.cpsat.child', 'multiprocessing')\n"
        "idle = sorted(m for m in sys.modules if m.startswith(unused))\n"
        "assert not idle, idle\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
