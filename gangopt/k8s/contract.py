"""What an import returns and takes: the round, and the object references export needs to
turn a plan back into API calls."""

from __future__ import annotations

from dataclasses import dataclass, field

from gangopt.schema import Policy, Round


@dataclass(frozen=True)
class ObjectRef:
    """A Kubernetes object, enough to address it in an API call."""

    api_version: str
    kind: str
    namespace: str
    name: str


@dataclass
class ImportOptions:
    """How to read the manifests.

    ``levels``: (level name, node label) pairs, coarsest first, e.g. ``[("block", "x/block"),
    ("rack", "x/rack")]``; they override a Kueue Topology or Volcano HyperNodes in the input.
    ``policy``: the round's policy (``now`` is filled in from the input when unset).
    """

    levels: list[tuple[str, str]] = field(default_factory=list)
    policy: Policy | None = None


@dataclass
class Imported:
    """The round plus what export needs to turn a plan back into API calls."""

    round: Round
    warnings: list[str]
    pending_pods: dict[str, dict[str, list[ObjectRef]]]
    running_pods: dict[str, ObjectRef]
    gang_objects: dict[str, ObjectRef]
