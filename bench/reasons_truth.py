"""Are waiting reasons true? Re-solve with the change each reason names and see (issue 17).

For every waiting gang of a round solved to proven optimality, the round is changed as the
gang's reasons say (every failing check's fix at once: remove the named gangs, raise the named
quota by the missing amount, add usable nodes, drop the selector, drop the required level,
ungroup) and solved again; the reason is *true* when the gang is then admitted. Rounds come
from ``tests/strategies.rounds`` (racks, blocks, cordons, taints, affinity, quotas with
cohorts and borrowing limits, groups, elastic gangs, preemption on and off), derandomized, so
the same command gives the same figure:

    python -m bench.reasons_truth --rounds 600                # the current reasons
    python -m bench.reasons_truth --rounds 600 --legacy FILE  # an older reasons.py, by its text

``--legacy`` reads the texts of an older ``gangopt/reasons.py`` (``git show REV:gangopt/reasons.py
> FILE``) the way issue 17 read them: named gangs removed, a quota raised by the gang's whole
minimum, enough empty copies of its largest usable node, the selector or the required level
dropped, the group dissolved.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings

import gangopt
from gangopt import reasons
from gangopt.quantities import format_quantity, parse_quantity
from gangopt.reasons import Fix, QuotaRaise
from gangopt.schema import Plan, Policy, Round, Status, Waiting
from tests.strategies import rounds

SMALL = {"max_nodes": 12, "max_pending": 6, "max_running": 5}
"""The round size the figures are measured on (issue 17: 4-16 nodes)."""


def solve_exact(rnd: Round) -> Plan:
    """CP-SAT in process, with time enough to prove these small rounds optimal."""
    policy = rnd.policy.model_copy(update={"hard_limit": False, "time_limit": 20.0, "workers": 1})
    return gangopt.solve(rnd, Policy.model_validate(policy.model_dump()))


def combined(fixes: Iterable[Fix]) -> Fix:
    """One fix doing what every given fix does."""
    out = Fix()
    for f in fixes:
        out = Fix(
            remove=tuple(dict.fromkeys([*out.remove, *f.remove])),
            quota=(*out.quota, *f.quota),
            free_roles=tuple(dict.fromkeys([*out.free_roles, *f.free_roles])),
            add_nodes=max(out.add_nodes, f.add_nodes),
            node_template=out.node_template or f.node_template,
            node_capacity=out.node_capacity or f.node_capacity,
            more_nodes=(*out.more_nodes, *f.more_nodes),
            drop_required=out.drop_required or f.drop_required,
            ungroup=out.ungroup or f.ungroup,
            no_fair_share=out.no_fair_share or f.no_fair_share,
        )
    return out


def apply_fix(rnd: Round, gang: str, fix: Fix) -> Round:
    """``rnd`` changed as ``fix`` says, for the waiting gang ``gang`` (validated again)."""
    data: dict[str, Any] = rnd.model_dump(mode="json")
    gone = set(fix.remove)
    data["running"] = [g for g in data["running"] if g["name"] not in gone]
    data["pending"] = [g for g in data["pending"] if g["name"] not in gone]
    me = next(g for g in data["pending"] if g["name"] == gang)
    for q in fix.quota:
        queue = next(x for x in data["queues"] if x["name"] == q.queue)
        amounts = queue.setdefault(q.field, {})
        amounts[q.resource] = format_quantity(parse_quantity(amounts.get(q.resource, 0)) + q.amount, q.resource)
    for role in me["roles"]:
        if role["name"] in fix.free_roles:
            role.update(node_selector={}, node_affinity=[], tolerations=[{"operator": "Exists"}])
    kinds = [(fix.node_template, fix.add_nodes, fix.node_capacity)] if fix.add_nodes and fix.node_template else []
    for i, (name, copies, capacity) in enumerate([*kinds, *fix.more_nodes]):
        template = next(n for n in data["cluster"]["nodes"] if n["name"] == name)
        for k in range(copies):
            node = {**template, "name": f"{template['name']}-cf{k}" + (f"-{i}" if i else ""), "schedulable": True}
            node["capacity"] = {**template["capacity"]}
            node["capacity"].update({r: format_quantity(v, r) for r, v in capacity})
            data["cluster"]["nodes"].append(node)
    if fix.drop_required and me.get("topology"):
        me["topology"]["required"] = None
    if fix.ungroup:
        me["group"] = None
    if fix.no_fair_share:
        for queue in data.get("queues", []):
            queue["weight"] = None
    return Round.model_validate(data)


@dataclass
class Tally:
    """Reasons judged, true ones, and the failures by code (with examples)."""

    judged: int = 0
    true: int = 0
    skipped: int = 0
    rounds: int = 0
    by_code: Counter[str] = field(default_factory=Counter)
    false_by_code: Counter[str] = field(default_factory=Counter)
    examples: list[str] = field(default_factory=list)
    cases: list[tuple[Round, Plan, str, Fix, Plan]] = field(default_factory=list)
    """The false ones: round, plan, gang, fix, plan after the fix (for a closer look)."""

    @property
    def share(self) -> float:
        return self.true / max(1, self.judged)


Judged = tuple[Waiting, Fix]
"""A waiting gang's reasons and the fix they name."""
FixesOf = Callable[[Round, Plan], list[Judged]]


def current_fixes(rnd: Round, plan: Plan) -> list[Judged]:
    """Each waiting gang's reasons and fix: every failing check's, at once."""
    return [
        (Waiting(gang=name, code=checks[0].code, reasons=[c.text for c in checks]), combined(c.fix for c in checks))
        for name, checks in reasons.waiting_checks(rnd, plan).items()
    ]


def judge(rnd: Round, plan: Plan, fixes_of: FixesOf, tally: Tally) -> None:
    """Re-solve once per waiting gang with its fix; count the gangs then admitted."""
    judged = fixes_of(rnd, plan)
    codes = {w.gang: w.code for w, _ in judged}
    texts = {w.gang: w.reasons for w, _ in judged}
    for name, fix in ((w.gang, f) for w, f in judged):
        changed = apply_fix(rnd, name, fix)
        again = solve_exact(changed)
        if again.status != Status.OPTIMAL:
            tally.skipped += 1
            continue
        tally.judged += 1
        tally.by_code[codes[name]] += 1
        if name in again.admitted:
            tally.true += 1
        else:
            tally.false_by_code[codes[name]] += 1
            tally.cases.append((rnd, plan, name, fix, again))
            if len(tally.examples) < 12:
                tally.examples.append(f"{name} [{codes[name]}] {texts[name]} fix={fix}")


def legacy_fixes(module: Any) -> FixesOf:
    """Fixes read from an older reasons module's texts, as issue 17 read them."""

    def fixes_of(rnd: Round, plan: Plan) -> list[Judged]:
        out = []
        names = {g.name for g in [*rnd.pending, *rnd.running]}
        for w in module.waiting_reasons(rnd, plan):
            gang = next(g for g in rnd.pending if g.name == w.gang)
            text = " ".join(w.reasons)
            if w.code == "outranked":
                named = re.split(r"went to ", text, maxsplit=1)[-1]
                fix = Fix(remove=tuple(n for n in re.split(r", | and ", named) if n in names))
            elif w.code == "group":
                fix = Fix(ungroup=True)
            elif w.code == "quota":
                need = gangopt.objective.ObjectiveTerms.of(rnd).min_pods(gang)
                gpu = sum(r.requests.get("gpu", 0) * need[r.name] for r in gang.roles)
                queue = next(q for q in rnd.queues if q.name == gang.queue)
                raises = [QuotaRaise(queue.name, "nominal", "gpu", gpu)]
                if queue.cohort is not None and "gpu" in queue.borrowing_limit:
                    raises.append(QuotaRaise(queue.name, "borrowing_limit", "gpu", gpu))
                fix = Fix(quota=tuple(raises))
            elif w.code == "eligibility":
                fix = Fix(free_roles=tuple(r.name for r in gang.roles))
            elif w.code == "topology":
                fix = Fix(drop_required=True)
            else:  # capacity: room on usable nodes, as many copies of the largest as pods
                checks = reasons.waiting_checks(rnd, plan)[w.gang]
                template = next((c.fix for c in checks if c.fix.node_template), None)
                node = template.node_template if template else rnd.cluster.nodes[0].name
                caps = template.node_capacity if template else ()
                fix = Fix(add_nodes=gang.minimum, node_template=node, node_capacity=caps)
            out.append((w, fix))
        return out

    return fixes_of


def measure(n_rounds: int, fixes_of: FixesOf) -> Tally:
    """Judge the reasons of ``n_rounds`` random small rounds proven optimal."""
    tally = Tally()

    @settings(
        max_examples=n_rounds,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        phases=[Phase.generate],  # a measurement: no shrinking of a failure, it is reported as drawn
    )
    @given(rounds(**SMALL))
    def one(rnd: Round) -> None:
        plan = solve_exact(rnd)
        if plan.status != Status.OPTIMAL or not plan.waiting:
            return
        tally.rounds += 1
        judge(rnd, plan, fixes_of, tally)

    one()
    return tally


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=600, help="random rounds drawn (default 600)")
    parser.add_argument("--legacy", help="an older gangopt/reasons.py, judged by its texts")
    args = parser.parse_args(argv)
    fixes_of: FixesOf = current_fixes
    if args.legacy:
        spec = importlib.util.spec_from_file_location("legacy_reasons", args.legacy)
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        fixes_of = legacy_fixes(module)
    start, cpu = time.perf_counter(), time.process_time()
    tally = measure(args.rounds, fixes_of)
    print(f"rounds drawn {args.rounds}, with waiting gangs and proven optimal {tally.rounds}")
    print(f"reasons judged {tally.judged} (re-solve not proven optimal: {tally.skipped})")
    print(f"true by their own counterfactual: {tally.true} ({100 * tally.share:.1f} %)")
    for code, n in sorted(tally.by_code.items()):
        print(f"  {code:12s} {n - tally.false_by_code[code]:4d} / {n:4d} true")
    for line in tally.examples:
        print("  false:", line)
    print(f"wall {time.perf_counter() - start:.1f} s, CPU {time.process_time() - cpu:.1f} s")


if __name__ == "__main__":
    main()
