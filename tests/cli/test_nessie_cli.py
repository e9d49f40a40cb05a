"""The installed `ratui` command on a real Nessie server (catalog: {type: nessie} in ratui.yaml), each command a
process of its own: the sample project runs, the branch commands agree with what Nessie's own REST API shows, a
rollback puts main's rows back, and a server that is not there, not Nessie, refuses a token or refuses a commit
is a coded error with main unchanged. A token (in ratui.yaml or RATUI_NESSIE_TOKEN) never shows in any output,
log or run record."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator

import pytest
import requests

from tests.conftest import TEST_SETTINGS
from tests.engine.run.test_nessie_sample import fresh_sample
from tests.nessie_server import TokenIssuer, free_port, nessie_server, reset
from tests.warm_engines import stop_engines, warm_engines


SETTINGS = TEST_SETTINGS + "catalog:\n  type: nessie\n  uri: {uri}\n"
FILE_TOKEN = "tok-in-ratui-yaml-5f1c0e"
ENV_TOKEN = "tok-in-environment-93ab7d"
CLV = "ecommerce.gold.customer_lifetime_value"
FOREIGN = ("Traceback", "File \"", "Exception", "at org.", "py4j", "WARN")


@pytest.fixture(scope="module")
def nessie(nessie_uri):
    return nessie_uri


class Cli:
    """`ratui ARGS --project ROOT` as a process of its own; every output kept (the token must be in none)."""

    def __init__(self, root: Path, warm: dict[str, str] | None = None):
        self.root = root
        self.warm = warm or {}  # the warm engine's variables (tests/warm_engines.py), for a walk a user types
        self.outputs: list[str] = []

    def __call__(self, *args: str, env: dict[str, str] | None = None, ok: bool = True,
                 timeout: float = 600) -> subprocess.CompletedProcess:
        proc = subprocess.run([sys.executable, "-m", "ratui", *args, "--project", str(self.root)],
                              capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, **self.warm, **(env or {})})
        self.outputs += [proc.stdout, proc.stderr]
        if ok:
            assert proc.returncode == 0, f"ratui {' '.join(args)}: exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
        return proc

    def json(self, *args: str, **kwargs) -> list[dict]:
        return [json.loads(line) for line in self(*args, "--json", **kwargs).stdout.splitlines()]

    def count(self, sql: str, ref: str = "main", env: dict[str, str] | None = None) -> int:
        out = self("query", sql, "--ref", ref, "--format", "json", env=env).stdout
        return json.loads(out)["n"]


def clv_rows(uri: str, root: Path, ref: str = "main", *, with_orders: bool = False) -> int:
    """The rows of gold.customer_lifetime_value on `ref` (`with_orders`: those with orders_total > 0), read through
    Nessie by PyIceberg in this process (no JVM: `ratui query` is asked only where the command itself is what is
    tested)."""
    import pyarrow.compute as pc

    from ratui.engine.state.catalog.nessie import NessieBranchCatalog

    catalog = NessieBranchCatalog(uri, root / ".ratui" / "reader.db", root)
    try:
        table = catalog.load_table(ref, CLV).scan().to_arrow()
    finally:
        catalog.close()
    if with_orders:  # SQL's WHERE orders_total > 0: a null is not kept
        table = table.filter(pc.greater(table["orders_total"], 0))
    return table.num_rows


def project(root: Path, uri: str, token: str | None = None, ns: str = "ecommerce",
            warm: dict[str, str] | None = None) -> Cli:
    settings = SETTINGS.format(ns=ns, uri=uri) + (f"  token: {token}\n" if token else "")
    (root / "ratui.yaml").write_text(settings)
    return Cli(root, warm)


def nessie_refs(uri: str) -> dict[str, str]:
    return {r["name"]: r["hash"] for r in requests.get(f"{uri}/trees", timeout=10).json()["references"]}


def nessie_history(uri: str, ref: str, limit: int) -> list[dict]:
    page = requests.get(f"{uri}/trees/{ref}/history", params={"max-records": limit}, timeout=10).json()
    return [e["commitMeta"] for e in page["logEntries"]][:limit]


def prop(meta: dict, name: str) -> str | None:
    values = (meta.get("allProperties") or {}).get(f"ratui.{name}") or [None]
    return values[0]


def coded_errors(proc: subprocess.CompletedProcess) -> list[dict]:
    """The coded errors a command printed: its --json error objects, or the error of each run result."""
    found = []
    for line in proc.stdout.splitlines():
        obj = json.loads(line) if line.startswith("{") else {}
        if isinstance(obj.get("error"), dict):
            found.append(obj["error"])
    return found


def no_foreign_text(proc: subprocess.CompletedProcess) -> None:
    for text in (proc.stdout, proc.stderr):
        assert not any(word in text for word in FOREIGN), text[-3000:]


# ------------------------------------------------------------------------------------------------ the workflow


@pytest.fixture
def warm(tmp_path: Path) -> Iterator[dict[str, str]]:
    """The warm engine on, as a user's shell has it: the walk below is a user's commands one after another."""
    with warm_engines(tmp_path / "engines") as env:
        yield env


def test_sample_and_the_branch_commands_agree_with_nessie(nessie: str, tmp_path: Path, warm: dict[str, str]) -> None:
    reset(nessie)
    cli = project(fresh_sample(tmp_path / "sample"), nessie, token=FILE_TOKEN, warm=warm)
    env = {"RATUI_NESSIE_TOKEN": ENV_TOKEN}

    # the table this test works on and everything upstream of it (the whole sample on Nessie: test_nessie_sample.py)
    results = cli.json("run", "+gold.customer_lifetime_value", env=env)
    assert len(results) == 5 and all(r["status"] == "success" for r in results), [r["error"] for r in results]
    assert list(nessie_refs(nessie)) == ["main"]  # every run branch merged and deleted
    history = nessie_history(nessie, "main", 100)
    assert {r["run_id"] for r in results} <= {prop(m, "run_id") for m in history}
    first_clv_run = next(r["run_id"] for r in results if r["pipeline"] == CLV)

    total = clv_rows(nessie, cli.root)
    kept = clv_rows(nessie, cli.root, with_orders=True)
    assert 0 < kept < total  # the sample has customers without orders: the edit below changes the rows

    # a branch of one's own, as Nessie sees it
    created = cli.json("branch", "create", "dev")[0]
    refs = nessie_refs(nessie)
    assert created["branch"] == "dev" and created["head"] == refs["dev"]
    listed = cli.json("branches", env=env)
    assert {r["name"]: r["head"] for r in listed} == refs
    table = cli("branch", "list").stdout.splitlines()[2:]
    assert {line.split()[0]: line.split()[1] for line in table} == {n: h[:12] for n, h in refs.items()}
    refused = cli("branch", "create", "9lives", ok=False)  # Nessie's rule: a letter first
    assert refused.returncode == 1 and refused.stderr.startswith("error[RAT-CAT-006]") and "letter" in refused.stderr
    assert nessie_refs(nessie) == refs

    # a run on dev changes dev only
    pipeline = tmp_path / "sample/ecommerce/pipelines/gold/customer_lifetime_value/pipeline.sql"
    pipeline.write_text(pipeline.read_text().rstrip("\n") + "\nWHERE orders_total > 0\n")
    run = cli.json("run", "gold.customer_lifetime_value", "--ref", "dev")
    assert [(r["pipeline"], r["status"]) for r in run] == [(CLV, "success")], run
    assert cli.count("SELECT count(*) AS n FROM gold.customer_lifetime_value", ref="dev") == kept
    assert clv_rows(nessie, cli.root) == total
    assert nessie_refs(nessie)["main"] == refs["main"]

    # diff: what ratui reports is what Nessie's diff between main and dev holds
    diff = cli.json("diff", "dev")
    nessie_diff = requests.get(f"{nessie}/trees/main/diff/dev", timeout=10).json()["diffs"]
    assert {d["table"] for d in diff} == {".".join(d["key"]["elements"]) for d in nessie_diff
                                          if (d.get("to") or d.get("from") or {}).get("type") == "ICEBERG_TABLE"}
    assert [(d["table"], d["changed_on"], d["left"]["rows"], d["right"]["rows"]) for d in diff] == \
        [(CLV, "left", kept, total)]

    # merge: a dry run changes nothing; the merge is Nessie's merge commit, dev's head its second parent
    dry = cli.json("merge", "dev", "--dry-run")[0]
    assert dry["tables"] == [CLV] and dry["commit"] is None and not dry["conflicts"]
    assert nessie_refs(nessie)["main"] == refs["main"]
    dev_head = nessie_refs(nessie)["dev"]
    merged = cli.json("merge", "dev")[0]
    head = nessie_history(nessie, "main", 1)[0]
    assert merged["commit"] == head["hash"] == nessie_refs(nessie)["main"]
    assert head["parentCommitHashes"][1:] == [dev_head]
    assert clv_rows(nessie, cli.root) == kept

    # log: Nessie's commit log of main, with ratui's facts in its commit properties
    log = cli.json("log", "--limit", "5", env=env)
    history = nessie_history(nessie, "main", 5)
    assert [e["hash"] for e in log] == [m["hash"] for m in history]
    assert [(e["kind"], e["run_id"]) for e in log] == [(prop(m, "kind"), prop(m, "run_id")) for m in history]
    assert log[0]["tables"][0]["table"] == CLV and log[0]["tables"][0]["rows"] == kept
    text = [line.split()[1] for line in cli("log", "--limit", "5").stdout.splitlines() if line.startswith("commit ")]
    assert text == [m["hash"][:12] for m in history]

    # rollback: a new Nessie commit that puts main's table back as the first run left it
    plan = cli.json("rollback", "gold.customer_lifetime_value", "--to", first_clv_run, "--dry-run")[0]
    assert plan["commit"] is None and nessie_refs(nessie)["main"] == merged["commit"]
    rolled = cli.json("rollback", "gold.customer_lifetime_value", "--to", first_clv_run)[0]
    head = nessie_history(nessie, "main", 1)[0]
    assert rolled["commit"] == head["hash"] and prop(head, "kind") == "rollback"
    assert head["parentCommitHashes"][0] == merged["commit"]
    assert [(c["table"], c["after"]["rows"]) for c in rolled["changes"]] == [(CLV, total)]
    assert clv_rows(nessie, cli.root) == total

    # dev changes the table again, but main rolled it back after dev's merge: Nessie's conflict, main unchanged
    assert [r["status"] for r in cli.json("run", "gold.customer_lifetime_value", "--ref", "dev", "--force")] == \
        ["success"]
    main = nessie_refs(nessie)["main"]
    proc = cli("merge", "dev", "--dry-run", "--json", ok=False)
    assert proc.returncode == 1 and json.loads(proc.stdout)["conflicts"] == [CLV]
    proc = cli("merge", "dev", "--json", ok=False)
    errors = coded_errors(proc)
    assert proc.returncode == 1 and [e["code"] for e in errors] == ["RAT-CAT-003"] and CLV in errors[0]["message"]
    assert nessie_refs(nessie)["main"] == main
    assert clv_rows(nessie, cli.root) == total

    # delete: gone from Nessie too
    assert cli.json("branch", "delete", "dev") == [{"deleted": "dev"}]
    assert list(nessie_refs(nessie)) == ["main"]

    # the token: in no output, log file or run record, nor in the warm engine's folder (its log, its state)
    cli("runs", "--json", env=env)
    cli("show", first_clv_run, env=env)
    (engine,) = [line["engine"] for line in cli.json("engine", "status")]
    assert engine["commands_served"] >= 5, engine  # the query, diff, merges and runs above were served warm
    stop_engines(Path(warm["RATUI_ENGINE_DIR"]))  # its Spark's scratch files come and go while it lives: read at rest
    files = [p for p in (cli.root / ".ratui").rglob("*") if p.is_file()]
    assert any(p.name == "ratui.db" for p in files) and any(p.parent.name == "logs" for p in files)
    files += [p for p in Path(warm["RATUI_ENGINE_DIR"]).rglob("*") if p.is_file()]
    for token in (FILE_TOKEN, ENV_TOKEN):
        assert not any(token in text for text in cli.outputs)
        assert not [p for p in files if token.encode() in p.read_bytes()]


# ------------------------------------------------------------------------------------------------ faults


def test_nessie_not_listening_is_rat_nes_001_within_seconds(tmp_path: Path, make_project) -> None:
    uri = f"http://127.0.0.1:{free_port()}/api/v2"
    cli = project(make_project({"demo/pipelines/bronze/items/pipeline.sql": "SELECT 1 AS id\n"}), uri, ns="demo")
    for args in (("run", "--json"), ("branches", "--json")):
        began = time.monotonic()
        proc = cli(*args, ok=False, timeout=120)
        took = time.monotonic() - began
        errors = coded_errors(proc)
        assert proc.returncode != 0 and [e["code"] for e in errors] == ["RAT-NES-001"], proc.stdout + proc.stderr
        assert uri in errors[0]["message"] and errors[0]["hint"]
        assert took < 20, f"`ratui {args[0]}` took {took:.1f} s to say Nessie is not there"
        no_foreign_text(proc)
    assert cli.json("runs") == []  # nothing was recorded


@pytest.fixture(scope="module")
def not_nessie(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A plain HTTP file server (Python's own): a JSON file that is not Nessie's config at /other/api/v2/config."""
    site = tmp_path_factory.mktemp("site")
    (site / "index.html").write_text("<html><body>not Nessie</body></html>\n")
    (site / "other/api/v2").mkdir(parents=True)
    (site / "other/api/v2/config").write_text('{"status": "ok", "version": 2}\n')
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(SimpleHTTPRequestHandler, directory=str(site)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("where", ["v1", "web server", "other JSON"])
def test_an_answer_that_is_not_nessies_api_v2_is_rat_nes_002(where: str, nessie: str, not_nessie: str,
                                                            make_project) -> None:
    uri = {"v1": nessie.replace("/api/v2", "/api/v1"), "web server": f"{not_nessie}/api/v2",
           "other JSON": f"{not_nessie}/other/api/v2"}[where]
    before = nessie_refs(nessie)
    cli = project(make_project({"demo/pipelines/bronze/items/pipeline.sql": "SELECT 1 AS id\n"}), uri, ns="demo")
    proc = cli("run", "--json", ok=False, timeout=120)
    errors = coded_errors(proc)
    assert proc.returncode != 0 and [e["code"] for e in errors] == ["RAT-NES-002"], proc.stdout + proc.stderr
    assert uri in errors[0]["message"]
    no_foreign_text(proc)
    assert nessie_refs(nessie) == before


def test_nessie_with_authentication_and_authorization(tmp_path_factory: pytest.TempPathFactory, make_project) -> None:
    """Nessie checking bearer tokens (JWTs, tests/nessie_server.py TokenIssuer) and its own authorization rules (CEL):
    the writer may do everything, the reader everything but change a table on main. A token Nessie does not accept
    is RAT-NES-003 (401); the reader's run, whose merge into main Nessie refuses (403), is RAT-NES-003 with main
    unchanged, while its reads work. No token shows anywhere."""
    issuer = TokenIssuer()
    writer, reader, stranger = issuer.token("ratui-writer"), issuer.token("ratui-reader"), TokenIssuer().token("x")
    rules = {"nessie.server.authorization.enabled": "true",
             "nessie.server.authorization.rules.writer": "role == 'ratui-writer'",
             "nessie.server.authorization.rules.reader":
                 "role == 'ratui-reader' && !(op in ['CREATE_ENTITY', 'UPDATE_ENTITY', 'DELETE_ENTITY'] "
                 "&& ref == 'main')"}
    with nessie_server(tmp_path_factory.mktemp("nessie-auth"), {**issuer.properties, **rules}) as uri:
        pipeline = "-- @merge_strategy: full_refresh\nSELECT * FROM VALUES (1, 'a'), (2, 'b') AS t(id, name)\n"
        cli = project(make_project({"demo/pipelines/bronze/items/pipeline.sql": pipeline}), uri, token=writer,
                      ns="demo")
        assert [r["status"] for r in cli.json("run")] == ["success"]  # the writer's token, from ratui.yaml
        assert requests.get(f"{uri}/trees", timeout=10).status_code == 401  # Nessie does check tokens
        main = requests.get(f"{uri}/trees/main", headers={"Authorization": f"Bearer {writer}"},
                            timeout=10).json()["reference"]["hash"]

        # a token Nessie does not accept (RATUI_NESSIE_TOKEN wins over ratui.yaml's)
        for args in (("branches", "--json"), ("run", "--force", "--json")):
            proc = cli(*args, env={"RATUI_NESSIE_TOKEN": stranger}, ok=False)
            errors = coded_errors(proc)
            assert proc.returncode != 0 and [e["code"] for e in errors] == ["RAT-NES-003"], proc.stdout + proc.stderr
            assert uri in errors[0]["message"] and "401" in errors[0]["message"]
            no_foreign_text(proc)

        # the reader: reads work, its run's merge into main is refused
        as_reader = {"RATUI_NESSIE_TOKEN": reader}
        assert [r["name"] for r in cli.json("branches", env=as_reader)] == ["main"]
        proc = cli("run", "--force", "--json", env=as_reader, ok=False)
        results = [json.loads(line) for line in proc.stdout.splitlines()]
        assert proc.returncode == 1 and proc.stderr == ""
        assert [(r["status"], r["error"]["code"]) for r in results] == [("failed", "RAT-NES-003")], results
        assert uri in results[0]["error"]["message"] and "ratui-reader" in results[0]["error"]["message"]
        no_foreign_text(proc)
        refs = requests.get(f"{uri}/trees", headers={"Authorization": f"Bearer {writer}"}, timeout=10).json()
        assert {r["name"]: r["hash"] for r in refs["references"]} == {"main": main}  # unchanged, no branch left
        assert cli.count("SELECT count(*) AS n FROM bronze.items", env=as_reader) == 2

        files = [p for p in (cli.root / ".ratui").rglob("*") if p.is_file()]
        for token in (writer, reader, stranger):
            signature = token.rsplit(".", 1)[1]
            assert not any(signature in text for text in cli.outputs)
            assert not [p for p in files if signature.encode() in p.read_bytes()]
