"""Convert the real inventories in ../shared/traces into committed cluster models under models/.

This script is the only place that reads the raw traces; the library and the tests read the
converted files, so the project stands alone. Re-run it after changing a converter:

    python scripts/convert_traces.py [--traces ../shared/traces] [--out models]

Every assumption the converters make is listed in models/README.md.
"""

from __future__ import annotations

import argparse
import csv
import io
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from a checkout without installing the package

from gangopt.replay.clusters import (  # noqa: E402
    lingjun_cluster,
    openb_cluster,
    pai2020_cluster,
    philly_vc_cluster,
    philly_vc_sizes,
    spot2026_cluster,
    write_cluster,
)

LIMIT = 2_000_000
"""Bytes per model file: keep the repository small."""


def read_csv(path: Path) -> Iterator[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        yield from csv.DictReader(handle)


def read_pai(folder: Path) -> list[dict[str, str]]:
    """The PAI spec ships as a header-less CSV inside a tarball, with its header beside it."""
    header = (folder / "pai_machine_spec.header").read_text(encoding="utf-8").strip().split(",")
    with tarfile.open(folder / "pai_machine_spec.tar.gz") as tar:
        member = tar.extractfile("pai_machine_spec.csv")
        if member is None:
            raise SystemExit("pai_machine_spec.csv missing from the tarball")
        text = member.read().decode("utf-8")
    return list(csv.DictReader(io.StringIO(text), fieldnames=header))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--traces", type=Path, default=ROOT.parent / "shared" / "traces")
    parser.add_argument("--out", type=Path, default=ROOT / "models")
    args = parser.parse_args()
    traces: Path = args.traces
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)

    openb = traces / "alibaba-gpu-v2023-openb" / "openb_node_list_gpu_node.csv"
    spot = traces / "alibaba-v2026-spot-gpu-nodes" / "node_info_df.csv"
    models = {
        "openb.json": lambda: openb_cluster(read_csv(openb)),
        "lingjun.json": lambda: lingjun_cluster(read_csv(traces / "alibaba-lingjun-2023-topo" / "topo.csv")),
        "philly-vc.json": lambda: philly_vc_cluster(
            philly_vc_sizes(read_csv(traces / "microsoft-philly-pollux" / "philly_vc.csv"))
        ),
        "pai2020.json": lambda: pai2020_cluster(read_pai(traces / "alibaba-gpu-v2020-machines")),
        "spot2026.json": lambda: spot2026_cluster(read_csv(spot)),
    }
    for name, build in models.items():
        cluster = build()
        size = write_cluster(cluster, out / name)
        gpus = sum(n.capacity.get("gpu", 0) for n in cluster.nodes) // 1000
        racks = len({n.topology["rack"] for n in cluster.nodes})
        blocks = len({n.topology["block"] for n in cluster.nodes})
        print(f"{name:16} {len(cluster.nodes):5} nodes {gpus:6} GPUs {racks:4} racks {blocks:3} blocks {size:9,} bytes")
        if size > LIMIT:
            raise SystemExit(f"{name} is {size:,} bytes, over the {LIMIT:,}-byte limit")


if __name__ == "__main__":
    main()
