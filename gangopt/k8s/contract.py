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
class KueueSetup:
    """What a Kueue admission needs beyond the round (see :mod:`gangopt.k8s.export`).

    ``flavors``: per ClusterQueue, per resource (Kubernetes name), the flavors that offer it;
    ``topology``: the node labels of the Kueue ``Topology`` the levels came from, highest first
    (``kubernetes.io/hostname`` last when it is a level), empty without one; ``gpu``: the
    Kubernetes name the input gave gangopt's ``gpu``."""

    flavors: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    topology: list[str] = field(default_factory=list)
    gpu: str = "nvidia.com/gpu"


@dataclass
class Imported:
    """The round plus what export needs to turn a plan back into API calls."""

    round: Round
    warnings: list[str]
    pending_pods: dict[str, dict[str, list[ObjectRef]]]
    running_pods: dict[str, ObjectRef]
    gang_objects: dict[str, ObjectRef]
    kueue: KueueSetup = field(default_factory=KueueSetup)
