"""The reference docs are generated from the pydantic models and must never drift from them."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

from gangopt.replay.workload import workload_schema
from gangopt.schema import json_schemas

ROOT = Path(__file__).resolve().parent.parent


def _gen_docs() -> ModuleType:
    """scripts/ is not a package; load the generator by path, as CI would run it."""
    spec = importlib.util.spec_from_file_location("gen_docs", ROOT / "scripts" / "gen_docs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generated_docs_are_up_to_date(tmp_path: Path) -> None:
    gen = _gen_docs()
    written = gen.write(tmp_path)
    assert {p.relative_to(tmp_path).as_posix() for p in written} == set(gen.OUTPUTS)
    for relative in gen.OUTPUTS:
        fresh = (tmp_path / relative).read_text(encoding="utf-8")
        committed = ROOT / relative
        assert committed.is_file(), f"{relative} is missing: run python scripts/gen_docs.py"
        assert committed.read_text(encoding="utf-8") == fresh, f"{relative} is stale: run python scripts/gen_docs.py"


def test_schema_md_documents_every_model_and_field() -> None:
    text = (ROOT / "docs" / "schema.md").read_text(encoding="utf-8")
    for schema in [*json_schemas().values(), workload_schema()]:
        models = {schema["title"]: schema, **schema["$defs"]}
        for name, model in models.items():
            assert f"### {name}\n" in text, name
            for field in model.get("properties", {}):
                assert f"| `{field}` |" in text, f"{name}.{field}"


def test_json_schema_files_match_cli_output() -> None:
    schemas = json_schemas()
    for which in ("round", "plan"):
        on_disk = json.loads((ROOT / "docs" / "schema" / f"{which}.schema.json").read_text(encoding="utf-8"))
        assert on_disk == schemas[which]
    on_disk = json.loads((ROOT / "docs" / "schema" / "workload.schema.json").read_text(encoding="utf-8"))
    assert on_disk == workload_schema()
