"""Landing zones in S3-compatible storage, against moto's server on 127.0.0.1 (a real HTTP endpoint: every call
goes through boto3, botocore's HTTP stack and the network, nothing is patched)."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from ratui.engine.errors import RatuiError
from ratui.engine.facade.engine import Engine
from ratui.engine.landing.s3 import S3Zone
from ratui.engine.landing.zone import ZoneEntry

from mainstate import main_fingerprint, run_one
from s3_server import free_port, isolate_aws, moto_server, new_bucket, s3_client


PEOPLE = "-- @merge_strategy: full_refresh\nSELECT * FROM {{ landing_zone('people') }}\n"
EVENTS = """\
-- @merge_strategy: append_only
-- @landing_mode: new_files
-- @archive_landing_zones: true
SELECT * FROM {{ landing_zone('events') }}
"""


@pytest.fixture(scope="module")
def endpoint(tmp_path_factory):
    with moto_server(tmp_path_factory.mktemp("moto")) as url:
        yield url


@pytest.fixture(autouse=True)
def aws_env(monkeypatch, tmp_path):
    """Credentials from the environment (boto3's chain), no shared config of the machine's user."""
    isolate_aws(monkeypatch, tmp_path)



def zone_settings(zones: dict[str, str], endpoint: str) -> str:
    lines = ["landing:", "  s3:", f"    endpoint_url: {endpoint}", "  zones:"]
    lines += [f"    {zone}: {url}" for zone, url in zones.items()]
    return "\n".join(lines) + "\n"


def project(make_project, endpoint: str, zones: dict[str, str], pipelines: dict[str, str]) -> Path:
    root = make_project(pipelines)
    (root / "ratui.yaml").write_text((root / "ratui.yaml").read_text() + zone_settings(zones, endpoint))
    return root


def keys(endpoint: str, bucket: str, prefix: str = "") -> list[str]:
    client = s3_client(endpoint)
    out = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        out += [o["Key"] for o in page.get("Contents", [])]
    return sorted(out)


def rows(engine: Engine, key: str, column: str = "id") -> list:
    table = engine.state.catalog.load_table("main", key).scan().to_arrow()
    return sorted(table.column(column).to_pylist())


def test_new_rewritten_and_deleted_objects_are_what_the_table_holds(make_project, spark, endpoint):
    bucket = new_bucket(endpoint)
    s3 = s3_client(endpoint)
    s3.put_object(Bucket=bucket, Key="raw/people/a.csv", Body=b"id,name\n1,ann\n2,bob\n")
    s3.put_object(Bucket=bucket, Key="raw/people/b.csv", Body=b"name,id\ncid,3\n")  # columns by name
    s3.put_object(Bucket=bucket, Key="raw/people/_samples/x.csv", Body=b"id,name\n99,never\n")
    s3.put_object(Bucket=bucket, Key="raw/people/.hidden.csv", Body=b"id,name\n98,never\n")
    root = project(make_project, endpoint, {"people": f"s3://{bucket}/raw/people"},
                   {"demo/pipelines/bronze/people/pipeline.sql": PEOPLE})
    engine = Engine.open(root)
    first = run_one(engine, "demo.bronze.people")
    assert first.status == "success", first.error
    assert rows(engine, "demo.bronze.people") == [1, 2, 3]
    ledger = {f.file: f for f in engine.landing_files("people")}
    assert sorted(ledger) == ["a.csv", "b.csv"]
    assert all(f.state == "loaded" for f in ledger.values())
    assert not any((root / ".ratui" / "staging").glob("*/s3")), "the run's staged objects outlive it"

    assert run_one(engine, "demo.bronze.people").status == "skipped"  # nothing changed in the bucket

    # rewritten: a new version of the file for the ledger, read again
    s3.put_object(Bucket=bucket, Key="raw/people/a.csv", Body=b"id,name\n1,ann\n2,bob\n4,dan\n")
    second = run_one(engine, "demo.bronze.people")
    assert second.status == "success", second.error
    assert "landing files" in second.reason
    assert rows(engine, "demo.bronze.people") == [1, 2, 3, 4]

    # deleted: in landing_mode all the bucket is the truth, the ledger forgets it
    s3.delete_object(Bucket=bucket, Key="raw/people/b.csv")
    third = run_one(engine, "demo.bronze.people")
    assert third.status == "success", third.error
    assert rows(engine, "demo.bronze.people") == [1, 2, 4]
    assert [f.file for f in engine.landing_files("people")] == ["a.csv"]


def test_new_files_load_once_archive_in_the_bucket_and_a_rebuild_reads_the_archive(make_project, spark, endpoint):
    bucket = new_bucket(endpoint, versioned=True)
    s3 = s3_client(endpoint)
    s3.put_object(Bucket=bucket, Key="events/a.jsonl", Body=b'{"id": 1}\n{"id": 2}\n')
    root = project(make_project, endpoint, {"events": f"s3://{bucket}/events/"},
                   {"demo/pipelines/bronze/events/pipeline.sql": EVENTS})
    engine = Engine.open(root)
    first = run_one(engine, "demo.bronze.events")
    assert first.status == "success", first.error
    assert keys(endpoint, bucket) == [f"events/_processed/{first.run_id}/a.jsonl"]
    assert [(f.file, f.state) for f in engine.landing_files("events")] == \
        [(f"_processed/{first.run_id}/a.jsonl", "loaded")]

    s3.put_object(Bucket=bucket, Key="events/b.jsonl", Body=b'{"id": 3}\n')
    assert run_one(engine, "demo.bronze.events").status == "success"
    assert run_one(engine, "demo.bronze.events").status == "skipped"
    assert rows(engine, "demo.bronze.events") == [1, 2, 3]  # exactly once

    # a bad object fails the run at its line, counts an attempt, and leaves main and the bucket as they were
    before = main_fingerprint(root)
    s3.put_object(Bucket=bucket, Key="events/c.jsonl", Body=b'{"id": 4}\n{"id": \n')
    bad = run_one(engine, "demo.bronze.events")
    assert bad.status == "failed"
    assert bad.error["code"] == "RAT-LND-007"
    assert bad.error["file"] == f"s3://{bucket}/events/c.jsonl" and bad.error["line"] == 2
    assert main_fingerprint(root) == before
    assert "events/c.jsonl" in keys(endpoint, bucket)
    assert {f.file: f.attempts for f in engine.landing_files("events")}["c.jsonl"] == 1
    s3.delete_object(Bucket=bucket, Key="events/c.jsonl")
    engine.landing_forget("events", "c.jsonl")

    # a rebuild reads every object the ledger knows, the archived ones included
    rebuilt = run_one(engine, "demo.bronze.events", full_refresh=True)
    assert rebuilt.status == "success", rebuilt.error
    assert rows(engine, "demo.bronze.events") == [1, 2, 3]

    # a reset makes an archived object loadable again
    assert engine.landing_reset("events", "a.jsonl") == 1
    again = run_one(engine, "demo.bronze.events")
    assert again.status == "success", again.error
    assert rows(engine, "demo.bronze.events") == [1, 1, 2, 2, 3]

    # the reaper's retention of archived files works in the bucket too; the newest archived object stays
    later = datetime.now(timezone.utc) + timedelta(days=8)
    archived = [k for k in keys(endpoint, bucket) if "/_processed/" in k]
    assert len(archived) == 2  # a and b (a reloaded from the archive stays where it is)
    dry = engine.reaper(clock=lambda: later).run(dry_run=True, tasks=["processed_files"]).tasks["processed_files"]
    assert len(dry.found) == 1 and len(dry.kept) == 1 and dry.error is None
    assert dry.kept[0]["name"].endswith("/b.jsonl") and dry.found[0]["name"].endswith("/a.jsonl")
    assert sorted(k for k in keys(endpoint, bucket) if "/_processed/" in k) == sorted(archived)
    real = engine.reaper(clock=lambda: later).run(tasks=["processed_files"]).tasks["processed_files"]
    assert sorted(i["name"] for i in real.removed) == sorted(i["name"] for i in dry.found)
    assert [f"s3://{bucket}/{k}" for k in keys(endpoint, bucket)] == [dry.kept[0]["name"]]
    purged = [f for f in engine.landing_files("events") if f.purged_at]
    assert [f.name for f in purged] == ["a.jsonl"]
    gone = run_one(engine, "demo.bronze.events", full_refresh=True)
    assert gone.status == "failed" and gone.error["code"] == "RAT-LND-005"
    assert "removed by the reaper" in gone.error["message"]


def test_a_zone_of_more_than_a_thousand_objects_is_listed_past_the_first_page(make_project, spark, endpoint):
    bucket = new_bucket(endpoint)
    s3 = s3_client(endpoint)
    count = 1005

    def put(i: int) -> None:
        s3.put_object(Bucket=bucket, Key=f"p/f{i:05d}.csv", Body=f"id\n{i}\n".encode())

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(put, range(count)))
    root = project(make_project, endpoint, {"people": f"s3://{bucket}/p"},
                   {"demo/pipelines/bronze/people/pipeline.sql": PEOPLE})
    engine = Engine.open(root)
    result = run_one(engine, "demo.bronze.people")
    assert result.status == "success", result.error
    assert rows(engine, "demo.bronze.people") == list(range(count))
    assert len(engine.landing_files("people")) == count


def test_refused_credentials_and_a_dead_endpoint_are_coded_errors_and_change_nothing(
        make_project, spark, endpoint, tmp_path):
    bucket = new_bucket(endpoint)
    s3_client(endpoint).put_object(Bucket=bucket, Key="p/a.csv", Body=b"id\n1\n")
    root = project(make_project, endpoint, {"people": f"s3://{bucket}/p"},
                   {"demo/pipelines/bronze/people/pipeline.sql": PEOPLE})
    engine = Engine.open(root)
    assert run_one(engine, "demo.bronze.people").status == "success"
    before, ledger = main_fingerprint(root), engine.landing_files("people")
    settings = (root / "ratui.yaml").read_text()

    # a server that checks credentials and knows none of ours
    with moto_server(tmp_path / "moto-auth", auth=True) as strict:
        (root / "ratui.yaml").write_text(settings.replace(endpoint, strict))
        result = run_one(Engine.open(root), "demo.bronze.people", force=True)
    assert result.status == "failed"
    assert result.error["code"] == "RAT-S3-002", result.error
    assert result.error["file"] == f"s3://{bucket}/p/"
    assert main_fingerprint(root) == before and engine.landing_files("people") == ledger

    # nothing listens at the endpoint: a coded error within seconds
    (root / "ratui.yaml").write_text(settings.replace(endpoint, f"http://127.0.0.1:{free_port()}"))
    began = time.monotonic()
    result = run_one(Engine.open(root), "demo.bronze.people", force=True)
    assert time.monotonic() - began < 30
    assert result.status == "failed"
    assert result.error["code"] == "RAT-S3-001", result.error
    assert main_fingerprint(root) == before and engine.landing_files("people") == ledger

    # a bucket that does not exist
    (root / "ratui.yaml").write_text(settings.replace(bucket, bucket + "-nope"))
    result = run_one(Engine.open(root), "demo.bronze.people", force=True)
    assert result.error["code"] == "RAT-S3-003", result.error
    assert main_fingerprint(root) == before


def test_an_object_rewritten_after_listing_is_not_fetched_as_the_listed_one(endpoint, tmp_path):
    bucket = new_bucket(endpoint)
    client = s3_client(endpoint)
    client.put_object(Bucket=bucket, Key="z/a.csv", Body=b"id\n1\n")
    zone = S3Zone(bucket, "z/", endpoint_url=endpoint, name="z")
    [listed] = zone.list()
    assert zone.fetch([listed], tmp_path / "ok")["a.csv"].read_bytes() == b"id\n1\n"
    client.put_object(Bucket=bucket, Key="z/a.csv", Body=b"id\n1\n2\n")
    with pytest.raises(RatuiError) as caught:
        zone.fetch([listed], tmp_path / "stale")
    assert caught.value.code == "RAT-S3-004" and caught.value.file == f"s3://{bucket}/z/a.csv"
    client.delete_object(Bucket=bucket, Key="z/a.csv")
    with pytest.raises(RatuiError) as caught:
        zone.fetch([ZoneEntry("a.csv", 4, 0, "")], tmp_path / "gone")
    assert caught.value.code == "RAT-S3-004"


def test_watch_mode_polls_the_bucket_and_runs_what_a_new_object_affects(make_project, spark, endpoint, monkeypatch):
    import threading

    from ratui.engine.watch.watcher import Watcher

    baseline = threading.Event()  # the watcher's first listing of the zone, the baseline, has been taken
    listing = S3Zone.list

    def watched_list(zone, *args, **kwargs):
        found = listing(zone, *args, **kwargs)
        if threading.current_thread().name == "ratui-watch-s3":
            baseline.set()
        return found

    monkeypatch.setattr(S3Zone, "list", watched_list)

    bucket = new_bucket(endpoint)
    s3 = s3_client(endpoint)
    s3.put_object(Bucket=bucket, Key="p/a.csv", Body=b"id\n1\n")
    root = project(make_project, endpoint, {"people": f"s3://{bucket}/p"},
                   {"demo/pipelines/bronze/people/pipeline.sql": PEOPLE})
    (root / "ratui.yaml").write_text((root / "ratui.yaml").read_text() + "watch:\n  poll_seconds: 1\n")
    engine = Engine.open(root)
    assert run_one(engine, "demo.bronze.people").status == "success"
    results = []
    watcher = Watcher(engine=engine, debounce_ms=100,
                      on_event=lambda e: results.append(e) if type(e).__name__ == "WatchRunResult" else None)
    with watcher:
        assert baseline.wait(60)  # the new object comes after the baseline: a change the next listing sees
        s3.put_object(Bucket=bucket, Key="p/b.csv", Body=b"id\n2\n")
        deadline = time.monotonic() + 60
        while not results and time.monotonic() < deadline:
            time.sleep(0.2)
    assert results, "the watcher never ran the pipeline for the new object"
    assert rows(engine, "demo.bronze.people") == [1, 2]
