"""One input object (:class:`Source`), the :class:`Context` that collects warnings and
problems over the whole input, and the small readers of field values that report a bad value
to the context instead of raising, so that one run names every broken field."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from gangopt.errors import InputError, Problem, json_path
from gangopt.k8s.contract import ObjectRef
from gangopt.quantities import format_quantity, parse_quantity

Obj = dict[str, Any]
M = TypeVar("M", bound=BaseModel)

GPU_NAMES = {"nvidia.com/gpu": "gpu", "amd.com/gpu": "gpu"}


@dataclass(frozen=True)
class Source:
    """One input object and where it sits, for paths and warnings."""

    index: int
    obj: Obj

    @property
    def kind(self) -> str:
        return str(self.obj.get("kind", ""))

    @property
    def api_version(self) -> str:
        return str(self.obj.get("apiVersion", ""))

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @property
    def meta(self) -> Obj:
        meta = self.obj.get("metadata")
        return meta if isinstance(meta, dict) else {}

    @property
    def name(self) -> str:
        return str(self.meta.get("name", ""))

    @property
    def namespace(self) -> str:
        return str(self.meta.get("namespace") or "")

    @property
    def labels(self) -> dict[str, str]:
        return string_map(self.meta.get("labels"))

    @property
    def annotations(self) -> dict[str, str]:
        return string_map(self.meta.get("annotations"))

    @property
    def ref(self) -> ObjectRef:
        return ObjectRef(self.api_version, self.kind, self.namespace, self.name)

    @property
    def subject(self) -> str:
        """``Pod default/trainer-0`` (``Node n1`` for cluster-scoped objects)."""
        return f"{self.kind} {self.namespace}/{self.name}" if self.namespace else f"{self.kind} {self.name}"

    def path(self, suffix: str = "") -> str:
        return f"items[{self.index}] ({self.subject}){suffix}"


def string_map(value: Any) -> dict[str, str]:
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}


class Context:
    """Warnings and problems collected over the whole input, so one run reports them all."""

    def __init__(self) -> None:
        self.warnings: list[tuple[str, str]] = []
        self.problems: list[Problem] = []

    def warn(self, src: Source | str, message: str) -> None:
        self.warnings.append((src.subject if isinstance(src, Source) else src, message))

    def error(self, path: str, message: str) -> None:
        self.problems.append(Problem(path, message))

    def raise_problems(self) -> None:
        if self.problems:
            raise InputError(self.problems, "manifests")

    def warning_lines(self) -> list[str]:
        """One line per message; the same message on many pods is said once ("and N more"),
        because a 64-pod gang with one odd field would otherwise print it 64 times."""
        subjects: dict[str, list[str]] = defaultdict(list)
        for subject, message in self.warnings:
            if subject not in subjects[message]:
                subjects[message].append(subject)
        lines = []
        for message, who in subjects.items():
            more = f" (and {len(who) - 1} more)" if len(who) > 1 else ""
            lines.append(f"{who[0]}{more}: {message}")
        return lines


def build(ctx: Context, model: type[M], where: str, fields: dict[str, str], **values: Any) -> M | None:
    """``model(**values)``, or None with every problem reported at the object field it came
    from: ``where`` (an object path) plus ``fields[model field]`` (``labels`` of a Node is
    ``.metadata.labels``), so that a value no reader checked (a taint key of 300 characters, a
    control character in a label) is named where the user can find it."""
    try:
        return model(**values)
    except ValidationError as error:
        for err in error.errors(include_url=False):
            loc = tuple(err["loc"])
            head = fields.get(str(loc[0]), f".{loc[0]}") if loc else ""
            ctx.error(where + head + json_path(loc[1:])[1:], str(err["msg"]).removeprefix("Value error, "))
        return None


def as_mapping(ctx: Context, value: Any, path: str) -> Obj:
    if value is None:
        return {}
    if not isinstance(value, dict):
        ctx.error(path, f"expected an object, got {type(value).__name__}")
        return {}
    return value


def as_sequence(ctx: Context, value: Any, path: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        ctx.error(path, f"expected a list, got {type(value).__name__}")
        return []
    return value


def as_quantity(ctx: Context, value: Any, path: str) -> int:
    try:
        return parse_quantity(value)
    except ValueError as error:
        ctx.error(path, str(error))
        return 0


def as_count(ctx: Context, value: Any, path: str) -> int | None:
    """A member count (minMember, minCount, ...): a non-negative integer or an error."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        if isinstance(value, str) and value.isdigit():
            return int(value)  # annotations carry numbers as strings
        ctx.error(path, f"expected a non-negative integer, got {value!r}")
        return None
    return value


def timestamp(ctx: Context, src: Source) -> float | None:
    value = src.meta.get("creationTimestamp")
    if value is None:
        return None
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()
    except ValueError:
        ctx.error(src.path(".metadata.creationTimestamp"), f"not an RFC 3339 time: {value!r}")
        return None


def resource_name(name: str) -> str:
    return GPU_NAMES.get(name, name)


def as_resources(ctx: Context, value: Any, path: str) -> dict[str, int]:
    """A Kubernetes resource list -> gangopt resources in milli-units (GPU names unified)."""
    out: dict[str, int] = defaultdict(int)
    for name, amount in as_mapping(ctx, value, path).items():
        out[resource_name(str(name))] += as_quantity(ctx, amount, f"{path}.{name}")
    return dict(out)


def quantities(amounts: dict[str, int]) -> dict[str, str]:
    """Milli-units back to quantity strings: the schema's fields parse what they are given."""
    return {k: format_quantity(v, k) for k, v in amounts.items()}
