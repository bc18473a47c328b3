"""Offline capacity planning: replay a workload through any solver, round after round.

``workload.py`` (jobs and trace loaders), ``traces.py`` (CSV import, windows, load scaling,
deadline assignment) and ``clusters.py`` (reference cluster models) are the inputs;
``preflight.py`` names the jobs that can never start before any replay; ``generate.py``
makes seeded benchmark rounds; ``simulation.py`` is the discrete-event replay, deciding each
round through the door with a registry solver (``policies.py``); ``metrics.py``, ``slo.py``
judge a replay; ``sweep.py`` runs policies x sizes x seeds in parallel; ``capacity.py``
searches the smallest cluster that meets SLOs; ``report.py`` writes tables and plots.
docs/capacity-planning.md walks through it.
"""
