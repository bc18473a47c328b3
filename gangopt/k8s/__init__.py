"""Build a gangopt :class:`~gangopt.schema.Round` from what ``kubectl get ... -o yaml`` prints.

A controller that wants gangopt's decisions does not have to write a Round by hand: it dumps
nodes, pods and the gang objects of whichever scheduler its users know (scheduler-plugins and
Koordinator ``PodGroup``, Koordinator gang annotations, Volcano ``PodGroup``, Kueue
``Workload``, the upstream ``scheduling.k8s.io`` Workload of KEP-4671) and this package maps them.
What cannot be mapped is reported as a warning naming the object (``Kind namespace/name: ...``),
never silently dropped; input that cannot be used raises :class:`~gangopt.errors.InputError`
whose paths name the object and field (``items[3] (Pod default/t-0).spec.containers[0]...``).

Mapping decisions (see also the report of the k8s import for docs):

* Nodes: ``status.allocatable`` is the capacity; ``nvidia.com/gpu`` and ``amd.com/gpu`` become
  ``gpu``; cpu, memory and gpu are always kept, other resources only when some pod requests
  them. ``pods`` (the kubelet's pod limit) is kept as resource ``pods`` when every node reports
  it, and every pod then requests 1 of it, so a node full of small pods is full for gangopt
  too. Cordoned (``spec.unschedulable``) and not-Ready nodes are ``schedulable: false``.
* Pods: requests follow Kubernetes' effective-request rule: max(sum of containers (+ sidecar
  init containers), every regular init container (+ sidecars started before it)), plus
  ``spec.overhead``; a resource with only a limit requests its limit.
* Gangs are named ``<namespace>/<name>``; bound pods are named ``<namespace>/<pod>`` in the round.
* Preemptible: a running gang is *not* preemptible when one of its pods has the Koordinator
  label ``quota.scheduling.koordinator.sh/preemptible: "false"`` or Volcano's
  ``volcano.sh/preemptable: "false"`` (label or annotation), has a priority of at least
  1,000,000,000 (Kubernetes reserves those for system-critical classes), is owned by a
  DaemonSet (it would be recreated on the same node) or is a static (mirror) pod.
* ``submit_time`` (pending and running gangs) is the gang object's ``creationTimestamp`` (else
  its oldest pod's), in seconds since the epoch; ``policy.now`` is the latest
  ``creationTimestamp`` in the input. A running gang's ``started_at`` is its newest bound pod's
  ``creationTimestamp`` (a restarted gang's pods are created anew), which the cpsat solver's
  look-ahead reads to protect young gangs from eviction churn; ``expected_end`` and
  ``expected_duration`` are not in Kubernetes objects.

Modules, in the order an import runs (:func:`~gangopt.k8s.importer.import_documents`):
:mod:`~gangopt.k8s.documents` reads YAML/JSON and flattens Lists; :mod:`~gangopt.k8s.kinds`
sorts objects by the kinds gangopt reads; :mod:`~gangopt.k8s.pods`, :mod:`~gangopt.k8s.nodes`,
:mod:`~gangopt.k8s.topology` and :mod:`~gangopt.k8s.queues` read those objects;
:mod:`~gangopt.k8s.gangs` finds each gang form and gives every pod its gang;
:mod:`~gangopt.k8s.assemble` turns gangs into the round's running and pending gangs. All of them
report through the :class:`~gangopt.k8s.context.Context`. :mod:`~gangopt.k8s.export` goes back:
a plan to Bindings, Evictions and status patches. The contract (:mod:`~gangopt.k8s.contract`) is
what this package exports.
"""

from gangopt.k8s.contract import Imported, ImportOptions, ObjectRef
from gangopt.k8s.documents import load_documents
from gangopt.k8s.export import export_plan
from gangopt.k8s.importer import import_documents

__all__ = ["ImportOptions", "Imported", "ObjectRef", "export_plan", "import_documents", "load_documents"]
