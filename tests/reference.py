"""An exact reference for the tier values of small rounds: one CP-SAT model per node and pod,
written from docs/rules.md alone (issue 13, item 1).

It shares nothing with :mod:`gangopt.solvers.cpsat` (no node classes, no packing patterns, no
prefilter) and keeps its own reading of eligibility, as the validator does: a bug in the
solver's encoding or in the bounds then shows up as a disagreement, not as two copies of one
mistake agreeing. Only the objective's *values* come from :mod:`gangopt.objective` (the
definition of what a gang is worth, not an encoding).

What it models, per node: capacity (kept running pods + new pods), eligibility (cordons,
selectors, affinity, taints), role and gang minimums and maximums, required topology (one
domain per gang), evictions and shrinks of preemptible running gangs, and rule 5's "a node
where a victim lost pods receives new pods only from strictly higher priorities". It leaves
out what can only lower the optimum's tier values: the reprieve and ``for_gangs`` parts of
rule 5, growth of running gangs (it only takes room) and the secondary terms. So its tier
values are those of a **relaxation**: at least the true lexicographic optimum (every bound
must stay above them), and equal to it whenever a valid plan reaches them. Rounds with
quotas, gang groups or slices are refused (the fragmented family has none).

Tiers are solved lexicographically, highest priority first, each fixed before the next.
"""

from __future__ import annotations

from dataclasses import dataclass

from ortools.sat.python import cp_model

from gangopt.objective import ObjectiveTerms
from gangopt.schema import Node, Role, Round


@dataclass(frozen=True)
class Reference:
    """Per priority, the tier value (objective units) of the relaxation's lexicographic
    optimum, and whether every tier was proven optimal within the time given."""

    tiers: dict[int, int]
    proven: bool


def _eligible(node: Node, role: Role) -> bool:
    """docs/rules.md rule 3, read again here (not through gangopt.arrays)."""
    if not node.schedulable:
        return False
    if any(node.labels.get(key) != value for key, value in role.node_selector.items()):
        return False
    for term in role.node_affinity:
        present = term.key in node.labels
        value = node.labels.get(term.key)
        holds = {
            "In": present and value in term.values,
            "NotIn": not present or value not in term.values,
            "Exists": present,
            "DoesNotExist": not present,
        }[term.operator]
        if not holds:
            return False
    for taint in node.taints:
        if taint.effect not in ("NoSchedule", "NoExecute"):
            continue
        tolerated = False
        for tol in role.tolerations:
            if tol.effect is not None and tol.effect != taint.effect:
                continue
            if tol.key and tol.key != taint.key:
                continue
            if tol.operator == "Exists" or tol.value == taint.value:
                tolerated = True
                break
        if not tolerated:
            return False
    return True


def reference_optimum(rnd: Round, seconds_per_tier: float = 20.0, workers: int = 1) -> Reference:
    """The relaxation's lexicographic tier optimum of ``rnd`` (see the module docstring)."""
    if rnd.queues or any(g.group for g in rnd.pending):
        raise ValueError("the reference model leaves out quotas and gang groups")
    gangs = [*rnd.pending, *rnd.running]
    if any(g.topology is not None and g.topology.slice_level is not None for g in gangs):
        raise ValueError("the reference model leaves out slices")
    terms = ObjectiveTerms.of(rnd)
    nodes = rnd.cluster.nodes
    index = {node.name: i for i, node in enumerate(nodes)}
    resources = sorted(
        {r for node in nodes for r in node.capacity} | {r for g in gangs for x in g.roles for r in x.requests}
    )
    model = cp_model.CpModel()
    tier: dict[int, list[tuple[cp_model.IntVar | int, int]]] = {}
    usage: list[dict[str, list[tuple[cp_model.IntVar | int, int]]]] = [{r: [] for r in resources} for _ in nodes]
    new_prio: list[list[tuple[int, cp_model.IntVar]]] = [[] for _ in nodes]  # (priority, pods) per node

    for gang in rnd.pending:
        admitted = model.new_bool_var(f"a[{gang.name}]")
        tier.setdefault(gang.priority, []).append((admitted, terms.tier_value(gang)))
        members = []
        on_node: list[list[cp_model.IntVar]] = [[] for _ in nodes]
        for role in gang.roles:
            pods = []
            for i, node in enumerate(nodes):
                if not _eligible(node, role):
                    continue
                x = model.new_int_var(0, role.replicas, f"x[{gang.name},{role.name},{node.name}]")
                pods.append(x)
                on_node[i].append(x)
                new_prio[i].append((gang.priority, x))
                for r, amount in role.requests.items():
                    if amount:
                        usage[i][r].append((x, amount))
            if not pods:
                if gang.role_minimum(role) > 0:
                    model.add(admitted == 0)
                continue
            total = sum(pods)
            model.add(total >= gang.role_minimum(role)).only_enforce_if(admitted)
            model.add(total <= role.replicas * admitted)
            members.append(total)
        if not members:
            model.add(admitted == 0)
            continue
        model.add(sum(members) >= gang.minimum).only_enforce_if(admitted)
        model.add(sum(members) <= gang.maximum)
        if gang.topology is not None and gang.topology.required is not None:
            level = gang.topology.required
            domains = sorted({node.topology[level] for node in nodes} if level != "node" else {n.name for n in nodes})
            pick = {d: model.new_bool_var(f"d[{gang.name},{d}]") for d in domains}
            model.add(sum(pick.values()) == admitted)
            for i, node in enumerate(nodes):
                domain = node.name if level == "node" else node.topology[level]
                for x in on_node[i]:
                    model.add(x == 0).only_enforce_if(pick[domain].Not())

    for run in rnd.running:
        movable = rnd.policy.preemption and run.preemptible
        roles = {role.name: role for role in run.roles}
        if not movable:
            tier.setdefault(run.priority, []).append((1, terms.tier_value(run)))
            for pod in run.pods:
                for r, amount in roles[pod.role].requests.items():
                    if amount:
                        usage[index[pod.node]][r].append((1, amount))
            continue
        alive = model.new_bool_var(f"alive[{run.name}]")
        tier.setdefault(run.priority, []).append((alive, terms.tier_value(run)))
        kept_by_role: dict[str, list[cp_model.IntVar]] = {}
        per_node: dict[tuple[int, str], int] = {}
        for pod in run.pods:
            key = (index[pod.node], pod.role)
            per_node[key] = per_node.get(key, 0) + 1
        for (i, role_name), count in per_node.items():
            kept = model.new_int_var(0, count, f"k[{run.name},{role_name},{i}]")
            model.add(kept <= count * alive)
            kept_by_role.setdefault(role_name, []).append(kept)
            for r, amount in roles[role_name].requests.items():
                if amount:
                    usage[i][r].append((kept, amount))
            # Rule 5: a node where the victim lost pods takes new pods of higher priorities only.
            lost = model.new_bool_var(f"lost[{run.name},{role_name},{i}]")
            model.add(kept == count).only_enforce_if(lost.Not())
            for prio, x in new_prio[i]:
                if prio <= run.priority:
                    model.add(x == 0).only_enforce_if(lost)
        for role in run.roles:
            kept_role = sum(kept_by_role.get(role.name, []))
            model.add(kept_role >= run.role_minimum(role)).only_enforce_if(alive)
        total = sum(sum(v) for v in kept_by_role.values())
        model.add(total >= run.minimum).only_enforce_if(alive)
        if not run.elastic:
            model.add(total == len(run.pods)).only_enforce_if(alive)

    for i, node in enumerate(nodes):
        for r in resources:
            if usage[i][r]:
                cap = node.capacity.get(r, 0)
                model.add(sum(c * v for v, c in usage[i][r]) <= cap)

    solver = cp_model.CpSolver()
    solver.parameters.num_workers = workers
    solver.parameters.max_time_in_seconds = seconds_per_tier
    solver.parameters.random_seed = 0
    out: dict[int, int] = {}
    proven = True
    for prio in sorted(tier, reverse=True):
        expr = sum(c * v for v, c in tier[prio])
        model.maximize(expr)
        status = solver.solve(model)
        if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            raise RuntimeError(f"reference model: tier {prio} ended {solver.status_name(status)}")
        if status != cp_model.OPTIMAL:
            proven = False
        # The tier's value: its proven bound when not closed (still a bound on the optimum).
        value = round(solver.objective_value) if status == cp_model.OPTIMAL else int(solver.best_objective_bound)
        out[prio] = value
        model.add(expr >= round(solver.objective_value))
        model.clear_hints()  # type: ignore[no-untyped-call]
        for j, v in enumerate(solver.response_proto.solution):
            model.proto.solution_hint.vars.append(j)
            model.proto.solution_hint.values.append(v)
    return Reference(tiers=out, proven=proven)
