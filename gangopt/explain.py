"""A plain-text summary of a plan, for people reading a round's outcome in a terminal.

The plan JSON is the contract; this view answers the questions an operator asks first: did
the solver finish, who starts where, who loses pods and why, who waits and why, and how long
it took. It is deliberately dependency-free (aligned columns, no colours) so that it works in
logs, CI output and ``less`` alike.

The summary never trusts the plan to match the round: names the round does not know are shown
as they are, so ``gangopt explain`` can be pointed at a broken plan while debugging it.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence

from gangopt.schema import NODE_LEVEL, PendingGang, Plan, Round, RunningGang

_NUMERIC = (int, float)


def summary(rnd: Round, plan: Plan) -> str:
    """Render ``plan`` (a decision for ``rnd``) as aligned plain-text tables."""
    gangs: dict[str, PendingGang | RunningGang] = {g.name: g for g in rnd.running}
    gangs.update({g.name: g for g in rnd.pending})
    sections = [
        _header(plan),
        _scores(plan),
        _admitted(rnd, plan, gangs),
        _preemptions(plan),
        _resizes(plan),
        _waiting(rnd, plan),
        _timing(plan),
    ]
    return "\n\n".join(s for s in sections if s) + "\n"


def table(headers: Sequence[str], rows: Sequence[Sequence[object]], indent: str = "  ") -> str:
    """Aligned columns: numbers right-aligned, text left-aligned, last column unpadded.

    Leaving the last column ragged keeps long free-text reasons from padding every other row.
    """
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        for i, text in enumerate(row):
            widths[i] = max(widths[i], len(text))
    numeric = [bool(rows) and all(isinstance(row[i], _NUMERIC) for row in rows) for i in range(len(headers))]

    def line(values: Sequence[str]) -> str:
        parts = []
        for i, text in enumerate(values):
            if numeric[i]:
                parts.append(text.rjust(widths[i]))
            else:
                parts.append(text if i == len(values) - 1 else text.ljust(widths[i]))
        return (indent + "  ".join(parts)).rstrip()

    out = [line(headers), line(["-" * w for w in widths])]
    out += [line(row) for row in cells]
    return "\n".join(out)


def _cell(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1e6 else f"{value:.6g}"
    return str(value)


def _section(title: str, body: str | None, count: int | None = None) -> str:
    heading = title if count is None else f"{title} ({count})"
    return heading if body is None else f"{heading}\n{body}"


def _header(plan: Plan) -> str:
    gap = "-" if plan.gap is None else f"{plan.gap:.2%}"
    lines = [f"status:  {plan.status.value}", f"solver:  {plan.solver}", f"gap:     {gap}"]
    if plan.message:
        lines.append(f"message: {plan.message}")
    return "\n".join(lines)


def _scores(plan: Plan) -> str:
    rows: list[list[object]] = [[t.priority, t.value, t.bound] for t in plan.score.tiers]
    rows.append(
        ["secondary", plan.score.secondary, "-" if plan.score.secondary_bound is None else plan.score.secondary_bound]
    )
    return _section("Score per tier", table(["priority", "value", "bound"], rows))


def _admitted(rnd: Round, plan: Plan, gangs: dict[str, PendingGang | RunningGang]) -> str:
    """Admitted gangs with their new pods and where they landed (nodes and domains per level)."""
    nodes_of: dict[str, list[str]] = defaultdict(list)
    roles_of: dict[str, Counter[str]] = defaultdict(Counter)
    for p in plan.placements:
        nodes_of[p.gang].append(p.node)
        roles_of[p.gang][p.role] += 1
    topo = {n.name: n.topology for n in rnd.cluster.nodes}
    levels = rnd.cluster.topology_levels
    rows: list[list[object]] = []
    for name in plan.admitted:
        gang = gangs.get(name)
        members = len(nodes_of[name])
        wanted = (
            "?"
            if gang is None
            else (str(gang.minimum) if gang.minimum == gang.maximum else f"{gang.minimum}-{gang.maximum}")
        )
        used = sorted(set(nodes_of[name]))
        domains = " ".join(f"{level}:{len({topo[n].get(level, '?') for n in used if n in topo})}" for level in levels)
        rows.append(
            [
                name,
                "?" if gang is None else gang.priority,
                members,
                wanted,
                " ".join(f"{r}={c}" for r, c in sorted(roles_of[name].items())) or "-",
                len(used),
                domains or f"{NODE_LEVEL}:{len(used)}",
                _short(used),
            ]
        )
    if not rows:
        return _section("Admitted", "  (none)", 0)
    headers = ["gang", "priority", "members", "wanted", "roles", "#nodes", "domains", "nodes"]
    return _section("Admitted", table(headers, rows), len(rows))


def _preemptions(plan: Plan) -> str:
    if not plan.preemptions:
        return _section("Preemptions", "  (none)", 0)
    rows: list[list[object]] = [
        [p.gang, p.kind, p.priority, len(p.pods), p.cost, _short(sorted(set(p.nodes))), "for " + ", ".join(p.for_gangs)]
        for p in plan.preemptions
    ]
    headers = ["gang", "kind", "priority", "pods", "cost(GPU-h)", "nodes", "reason"]
    return _section("Preemptions", table(headers, rows), len(rows))


def _resizes(plan: Plan) -> str:
    if not plan.resizes:
        return _section("Resizes", "  (none)", 0)
    reasons = {p.gang: "shrunk for " + ", ".join(p.for_gangs) for p in plan.preemptions if p.kind == "shrink"}
    rows: list[list[object]] = []
    for r in plan.resizes:
        grows = r.to_members > r.from_members
        reason = "grows into free capacity" if grows else reasons.get(r.gang, "shrinks")
        rows.append([r.gang, r.from_members, r.to_members, reason])
    return _section("Resizes", table(["gang", "from", "to", "reason"], rows), len(rows))


def _waiting(rnd: Round, plan: Plan) -> str:
    """Every pending gang not admitted, with its reason; gangs the plan forgot are flagged."""
    rows: list[list[object]] = []
    listed = set()
    priority = {g.name: g.priority for g in rnd.pending}
    for w in plan.waiting:
        listed.add(w.gang)
        rows.append([w.gang, priority.get(w.gang, "?"), w.code, "; ".join(w.reasons) or "-"])
    admitted = set(plan.admitted)
    for g in rnd.pending:
        if g.name not in admitted and g.name not in listed:
            rows.append([g.name, g.priority, "?", "not mentioned by the plan"])
    if not rows:
        return _section("Waiting", "  (none)", 0)
    return _section("Waiting", table(["gang", "priority", "code", "reasons"], rows), len(rows))


def _timing(plan: Plan) -> str:
    s = plan.stats
    rows: list[list[object]] = [
        ["nodes", s.nodes, f"{s.nodes_pruned} pruned, {s.node_classes} classes"],
        ["gangs", s.gangs, f"{s.gangs_pruned} pruned"],
        ["model", s.variables, f"variables, {s.constraints} constraints, {s.stages} stages"],
        ["parse", round(s.parse_seconds, 3), "seconds (reading and checking the round; within the time limit)"],
        ["prefilter", round(s.prefilter_seconds, 3), "seconds"],
        ["build", round(s.build_seconds, 3), "seconds"],
        ["solve", round(s.solve_seconds, 3), "seconds"],
        ["total", round(s.total_seconds, 3), "seconds"],
        ["cpu", round(s.cpu_seconds, 3), "CPU seconds (this process and its solver children)"],
    ]
    return _section("Stats", table(["what", "value", "detail"], rows))


def _short(names: list[str], limit: int = 6) -> str:
    """At most ``limit`` names, so a 500-node gang does not make a 10 kB line."""
    if not names:
        return "-"
    if len(names) <= limit:
        return ",".join(names)
    return ",".join(names[:limit]) + f",... (+{len(names) - limit})"
