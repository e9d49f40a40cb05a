"""The `Zone` contract (landing/zone.py), one suite run against each kind of zone: a folder of the project and an S3
prefix on moto's server (a real HTTP endpoint on 127.0.0.1, every call through boto3). What a run, the watcher and
the reaper rely on is the same whichever kind a zone is: which names are active, archiving and the archive's names,
lookups of archived files, staging bytes for Spark, purging, and how `open_zone` picks the kind."""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest

from ratui.engine.errors import RatuiError
from ratui.engine.landing.local import LocalZone
from ratui.engine.landing.s3 import S3Zone
from ratui.engine.landing.zone import Zone, open_zone, zone_digest
from ratui.engine.project.settings import load_settings
from ratui.engine.state.ledger import Ledger

from s3_server import isolate_aws, moto_server, past_the_second, s3_client

# names a user or a tool leaves in a zone that are never landing files
NEVER_READ = [".hidden.csv", "_notes.csv", "~lock.csv", "draft.csv~", "edit.csv.swp", "upload.csv.tmp",
              "_samples/s.csv", "_processed/old/x.csv", "sub/deeper.csv"]


@dataclass
class Made:
    zone: Zone
    put: Callable[[str, bytes], None]  # write a file (a name relative to the zone) as a user would
    remove: Callable[[str], None]


@pytest.fixture(scope="module")
def endpoint(tmp_path_factory):
    with moto_server(tmp_path_factory.mktemp("moto")) as url:
        yield url


@pytest.fixture
def aws_env(monkeypatch, tmp_path):
    isolate_aws(monkeypatch, tmp_path)


def _project(root: Path, extra: str = "") -> Path:
    (root / "demo/pipelines").mkdir(parents=True)
    (root / "ratui.yaml").write_text("namespace: demo\n" + extra)
    return root


@pytest.fixture(params=["local", "s3",
                        "s3-in-place"])
def made(request, tmp_path) -> Made:
    if request.param == "local":
        root = _project(tmp_path / "p")
        folder = root / "demo/landing/orders"
        folder.mkdir(parents=True)

        def put(name: str, data: bytes) -> None:
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_bytes(data)

        zone = open_zone(load_settings(root), "demo", "orders")
        return Made(zone, put, lambda name: (folder / name).unlink())
    endpoint = request.getfixturevalue("endpoint")
    request.getfixturevalue("aws_env")
    bucket = f"lake-{uuid.uuid4().hex[:12]}"
    client = s3_client(endpoint)
    client.create_bucket(Bucket=bucket)
    read = "  s3_read: in_place\n" if request.param == "s3-in-place" else ""
    root = _project(tmp_path / "p", f"landing:\n{read}  s3:\n    endpoint_url: {endpoint}\n"
                                    f"  zones:\n    orders: s3://{bucket}/in/orders\n")
    zone = open_zone(load_settings(root), "demo", "orders")
    return Made(zone, lambda name, data: client.put_object(Bucket=bucket, Key=f"in/orders/{name}", Body=data),
                lambda name: client.delete_object(Bucket=bucket, Key=f"in/orders/{name}"))


def test_open_zone_picks_the_kind_from_the_settings(made):
    assert isinstance(made.zone, (LocalZone, S3Zone))
    assert (made.zone.namespace, made.zone.name) == ("demo", "orders")
    assert made.zone.polled is isinstance(made.zone, S3Zone)  # a bucket is polled, a folder is watched
    assert made.zone.url.startswith("s3://") is isinstance(made.zone, S3Zone)


def test_only_active_names_are_listed_with_their_sizes(made):
    for name in NEVER_READ:
        made.put(name, b"id\n0\n")
    made.put("b.csv", b"id\n2\n22\n")
    made.put("a.csv", b"id\n1\n")
    listed = made.zone.list()
    assert [(e.name, e.size) for e in listed] == [("a.csv", 5), ("b.csv", 8)]
    assert all(e.mtime_ns > 0 for e in listed)
    # change detection sees a rewrite (size here) and nothing of the names never read
    before = zone_digest(listed)
    made.put("_notes.csv", b"other\n")
    assert zone_digest(made.zone.list()) == before
    made.put("b.csv", b"id\n2\n")
    assert zone_digest(made.zone.list()) != before


def test_archive_moves_files_under_processed_and_lookup_finds_both_names(made):
    made.put("a.csv", b"id\n1\n")
    made.put("b.csv", b"id\n2\n")
    moved = made.zone.archive(["a.csv", "gone.csv"], "run-1")
    assert list(moved) == ["a.csv"]  # a file already gone is left out, not an error
    assert moved["a.csv"].name == "_processed/run-1/a.csv" and moved["a.csv"].size == 5
    assert [e.name for e in made.zone.list()] == ["b.csv"]
    assert [e.name for e in made.zone.processed()] == ["_processed/run-1/a.csv"]
    found = made.zone.lookup(["_processed/run-1/a.csv", "b.csv", "a.csv", "_processed/run-2/b.csv"])
    assert sorted(found) == ["_processed/run-1/a.csv", "b.csv"]
    assert made.zone.archived_to("run-1").endswith("_processed/run-1")
    assert made.zone.where("_processed/run-1/a.csv").endswith("orders/_processed/run-1/a.csv")


def test_staged_files_hold_the_listed_bytes(made, tmp_path):
    made.put("a.csv", b"id\n1\n")
    made.put("b c.csv", b"id\n2\n")
    seen = []
    staged = made.zone.stage(made.zone.list(), tmp_path / "staging", lambda done, total, size: seen.append(done))
    assert {name: zf.read_bytes() for name, zf in staged.items()} == {"a.csv": b"id\n1\n", "b c.csv": b"id\n2\n"}
    assert not made.zone.changed(made.zone.list())  # nothing changed since the listing
    in_place = getattr(made.zone, "in_place", False)
    if made.zone.polled and not in_place:
        assert seen[-1] == 2  # downloads report their progress
    if in_place:  # Spark reads the objects from the bucket: nothing is downloaded
        assert not (tmp_path / "staging").exists() and not seen
        assert {zf.spark_uri for zf in staged.values()} == {made.zone.where("a.csv"), made.zone.where("b c.csv")}


def test_purge_deletes_archived_files_and_nothing_else(made):
    made.put("a.csv", b"id\n1\n")
    made.put("b.csv", b"id\n2\n")
    made.zone.archive(["a.csv", "b.csv"], "run-1")
    made.put("c.csv", b"id\n3\n")
    [first, second] = made.zone.processed()
    assert made.zone.purge([first]) == {first.name}
    assert [e.name for e in made.zone.processed()] == [second.name]
    assert [e.name for e in made.zone.list()] == ["c.csv"]


def test_the_ledger_keeps_each_file_once_and_sees_a_rewrite_as_new(made, tmp_path):
    ledger = Ledger(tmp_path / "state.db")
    made.put("a.csv", b"id\n1\n")
    rows = ledger.sync("demo", "orders", "demo.bronze.raw", made.zone.list())
    assert [(r.file, r.state) for r in rows] == [("a.csv", "unloaded")]
    moved = made.zone.archive(["a.csv"], "r1")
    ledger.mark_archived("demo", "orders", "r1", moved, ["demo.bronze.raw"], made.zone.archived_to("r1"))
    assert [r.file for r in ledger.files("demo", "orders", "demo.bronze.raw")] == ["_processed/r1/a.csv"]
    past_the_second()  # an object store keeps whole seconds: the new file is dated in a later one
    made.put("a.csv", b"id\n1\n2\n")  # a new file of the same name: a new row
    rows = ledger.sync("demo", "orders", "demo.bronze.raw", made.zone.list())
    assert sorted(r.file for r in rows) == ["_processed/r1/a.csv", "a.csv"]


def test_a_local_zone_that_is_not_there_is_named_with_the_ones_that_are(tmp_path):
    root = _project(tmp_path / "p")
    (root / "demo/landing/orders").mkdir(parents=True)
    with pytest.raises(RatuiError) as err:
        open_zone(load_settings(root), "demo", "order", file="pipeline.sql")
    assert err.value.code == "RAT-LND-001" and err.value.file == "pipeline.sql"
    assert "orders" in (err.value.hint or "")
    for bad in ("../orders", "_processed", ".git"):
        with pytest.raises(RatuiError) as err:
            open_zone(load_settings(root), "demo", bad)
        assert err.value.code == "RAT-LND-001"


def test_a_local_file_that_changed_after_listing_is_reported(tmp_path):
    root = _project(tmp_path / "p")
    folder = root / "demo/landing/orders"
    folder.mkdir(parents=True)
    (folder / "a.csv").write_bytes(b"id\n1\n")
    (folder / "b.csv").write_bytes(b"id\n2\n")
    zone = open_zone(load_settings(root), "demo", "orders")
    listed = zone.list()
    (folder / "a.csv").write_bytes(b"id\n1\n11\n")
    (folder / "b.csv").unlink()
    assert [(e.name, how) for e, how in zone.changed(listed)] == [("a.csv", "5 -> 8 bytes")]
    assert [(e.name, how) for e, how in zone.changed(listed, removed=True)] == [
        ("a.csv", "5 -> 8 bytes"), ("b.csv", "removed")]


def test_a_local_zone_never_purges_through_a_symlink_out_of_the_project(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.csv").write_bytes(b"id\n1\n")
    root = _project(tmp_path / "p")
    folder = root / "demo/landing/orders"
    (folder / "_processed/r1").mkdir(parents=True)
    os.symlink(outside / "keep.csv", folder / "_processed/r1/keep.csv")
    zone = open_zone(load_settings(root), "demo", "orders")
    assert zone.processed() == []  # a symlink is not an archived file
    assert (outside / "keep.csv").exists()
