"""The `catalog:` section of ratui.yaml (catalog/config.py) and how a project's state opens its catalog from it."""

from __future__ import annotations

from pathlib import Path

import pytest

from ratui.engine.errors import RatuiError
from ratui.engine.project.settings import load_settings
from ratui.engine.state.catalog.config import CatalogConfig, catalog_config, open_catalog


def test_absent_section_is_the_embedded_catalog() -> None:
    assert catalog_config(None, env={}) == CatalogConfig("sqlite", None, None)
    assert catalog_config({"type": "sqlite"}, env={}) == CatalogConfig()


def test_nessie_section() -> None:
    config = catalog_config({"type": "nessie", "uri": "http://nessie:19120/api/v2/", "token": "t0k"}, env={})
    assert config == CatalogConfig("nessie", "http://nessie:19120/api/v2", "t0k")
    assert "t0k" not in repr(config)
    # the environment's token wins over the (often shared) file's
    assert catalog_config({"type": "nessie", "uri": "http://n/api/v2", "token": "file"},
                          env={"RATUI_NESSIE_TOKEN": "env"}).token == "env"


@pytest.mark.parametrize(("raw", "code", "words"), [
    ("nessie", "RAT-CFG-007", "mapping"),
    ({"type": "hive"}, "RAT-CFG-007", "catalog.type"),
    ({"type": "nessie"}, "RAT-CFG-007", "catalog.uri"),
    ({"type": "nessie", "uri": "nessie:19120"}, "RAT-CFG-007", "catalog.uri"),
    ({"type": "nessie", "uri": "http://n/api/v2", "tokne": "x"}, "RAT-CFG-002", "catalog.tokne"),
    ({"uri": "http://n/api/v2"}, "RAT-CFG-007", "type: nessie"),
    ({"type": "nessie", "uri": "http://n/api/v2", "token": 12}, "RAT-CFG-007", "catalog.token"),
    ({"type": "sqlite", "warehouse": "/mnt/lake"}, "RAT-CFG-007", "catalog.warehouse belong"),
    ({"type": "nessie", "uri": "http://n/api/v2", "warehouse": 12}, "RAT-CFG-007", "folder path"),
    ({"type": "nessie", "uri": "http://n/api/v2", "warehouse": ["a"]}, "RAT-CFG-007", "folder path"),
    ({"type": "nessie", "uri": "http://n/api/v2", "warehouse": " "}, "RAT-CFG-007", "folder path"),
])
def test_bad_sections_are_coded(raw: object, code: str, words: str) -> None:
    with pytest.raises(RatuiError) as err:
        catalog_config(raw, file="ratui.yaml", env={})
    assert err.value.code == code and words in err.value.message
    assert err.value.file == "ratui.yaml"


@pytest.mark.parametrize("kind", [{}, {"type": "nessie", "uri": "http://n/api/v2"}])
def test_an_s3_warehouse_works_with_either_catalog_and_keeps_its_settings(kind: dict) -> None:
    config = catalog_config({**kind, "warehouse": "s3://lake/tables", "s3": {"endpoint_url": "http://m:9000"}},
                            file="ratui.yaml", env={})
    assert config.on_object_store and config.warehouse == "s3://lake/tables"
    assert config.s3 == {"endpoint_url": "http://m:9000"}


def test_the_warehouse_is_a_folder_relative_to_the_project(tmp_path: Path) -> None:
    from ratui.engine.state.catalog.config import tables_root

    root = tmp_path / "proj"
    root.mkdir()
    assert tables_root(catalog_config({"type": "nessie", "uri": "http://n/api/v2"}, env={}), root) == root
    (tmp_path / "lake").mkdir()
    config = catalog_config({"type": "nessie", "uri": "http://n/api/v2", "warehouse": "../lake"}, env={})
    assert tables_root(config, root) == (tmp_path / "lake").resolve()
    missing = catalog_config({"type": "nessie", "uri": "http://n/api/v2", "warehouse": "/no/such/mount"}, env={})
    with pytest.raises(RatuiError) as err:
        tables_root(missing, root, file="ratui.yaml")
    assert err.value.code == "RAT-CFG-007" and "/no/such/mount" in err.value.message and err.value.hint


def test_read_from_ratui_yaml_and_open(tmp_path: Path) -> None:
    from ratui.engine.state.catalog.sqlite import SqliteBranchCatalog

    (tmp_path / "ratui.yaml").write_text("namespace: shop\n")
    config = catalog_config(load_settings(tmp_path).catalog or None, env={})
    assert config == CatalogConfig()
    assert isinstance(open_catalog(config, tmp_path / ".ratui" / "ratui.db", tmp_path), SqliteBranchCatalog)
    (tmp_path / "ratui.yaml").write_text("namespace: shop\ncatalog:\n  type: nessie\n  uri: http://h:19120/api/v2\n"
                                         "  token: s3cr3t-token-value\n")
    settings = load_settings(tmp_path)
    assert "s3cr3t" not in repr(settings)  # the token is kept, never shown
    assert catalog_config(settings.catalog, env={}) == CatalogConfig("nessie", "http://h:19120/api/v2",
                                                                     "s3cr3t-token-value")


def test_the_settings_schema_refuses_a_bad_catalog_section_at_its_line(tmp_path: Path) -> None:
    (tmp_path / "ratui.yaml").write_text("namespace: shop\ncatalog:\n  type: nesie\n")
    with pytest.raises(RatuiError) as err:
        load_settings(tmp_path)
    assert err.value.code == "RAT-CFG-007" and err.value.line == 3 and "nessie" in (err.value.hint or "")
    (tmp_path / "ratui.yaml").write_text("namespace: shop\ncatalog:\n  type: nessie\n  url: http://h\n")
    with pytest.raises(RatuiError) as err:
        load_settings(tmp_path)
    assert err.value.line == 4 and "uri" in (err.value.hint or "") + err.value.message


def test_project_state_opens_nessie_from_ratui_yaml(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    """ProjectState opens the catalog ratui.yaml's `catalog:` section names."""
    from ratui.engine.state.catalog.nessie import NessieBranchCatalog
    from ratui.engine.state.project_state import ProjectState
    from tests.nessie_server import nessie_server

    with nessie_server(tmp_path_factory.mktemp("nessie")) as uri:
        (tmp_path / "ratui.yaml").write_text(f"namespace: shop\ncatalog:\n  type: nessie\n  uri: {uri}\n")
        state = ProjectState(load_settings(tmp_path))
        try:
            assert isinstance(state.catalog, NessieBranchCatalog)
            assert state.catalog.get_ref("main").name == "main"
        finally:
            state.close()
