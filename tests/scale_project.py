"""Generated projects of any size, for the scale tests and benchmarks/scale.py.

    generate_project(root, 1500)      a project of 1,500 SQL pipelines in several namespaces
    seed_runs(root, 1_000_000)        a history of that many finished runs, written straight into SQLite
    fill_zone(folder, 100_000)        a landing zone of that many small CSV files

The shapes are the ones a team's project has: per namespace, bronze pipelines each loading a landing zone
(a few zones loaded by more than one), silver pipelines each cleaning one bronze table (fan-out), gold pipelines each
joining two or three silvers (fan-in), some of them across namespaces; one or two quality tests per pipeline, a
config.yaml on some, incremental and full-refresh strategies. Everything is deterministic: the same size gives the
same project, byte for byte.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

NAMESPACES = ("sales", "ops", "marketing", "finance", "support", "supply", "people", "risk", "web", "mobile")


def _namespaces(pipelines: int) -> list[str]:
    count = min(len(NAMESPACES), max(1, pipelines // 400))
    return list(NAMESPACES[:count])


def plan(pipelines: int) -> dict[str, list[tuple[str, str, list[str], list[str]]]]:
    """namespace -> [(layer, name, upstream keys, zones)] for a project of `pipelines` pipelines."""
    spaces = _namespaces(pipelines)
    out: dict[str, list[tuple[str, str, list[str], list[str]]]] = {}
    base, extra = divmod(pipelines, len(spaces))
    for index, ns in enumerate(spaces):
        n = base + (1 if index < extra else 0)
        bronze = max(1, n // 15)
        silver = max(1, (n - bronze) * 2 // 3)
        gold = n - bronze - silver
        zones = max(1, bronze * 4 // 5)
        items: list[tuple[str, str, list[str], list[str]]] = []
        for b in range(bronze):
            items.append(("bronze", f"raw_{b:05d}", [], [f"feed_{b % zones:05d}"]))
        for s in range(silver):
            items.append(("silver", f"clean_{s:05d}", [f"{ns}.bronze.raw_{(s * 7) % bronze:05d}"], []))
        for g in range(gold):
            picks = 2 + g % 2
            ups = sorted({f"{ns}.silver.clean_{(g * 13 + k * 31) % silver:05d}" for k in range(picks)})
            if len(spaces) > 1 and g % 10 == 0:  # one gold in ten also reads another namespace's silver
                other = spaces[(index + 1) % len(spaces)]
                ups.append(f"{other}.silver.clean_{g % max(1, silver // 2):05d}")
            items.append(("gold", f"mart_{g:05d}", ups, []))
        out[ns] = items
    return out


def _bronze_sql(zone: str) -> str:
    return ("-- @merge_strategy: full_refresh\n-- @description: every row of the feed, as delivered\n"
            "SELECT CAST(id AS BIGINT) AS id, CAST(amount AS DOUBLE) AS amount, category,\n"
            f"       CAST(updated_at AS TIMESTAMP) AS updated_at\nFROM {{{{ landing_zone('{zone}') }}}}\n")


def _silver_sql(index: int, upstream: str) -> str:
    ref = upstream.split(".", 1)[1]
    if index % 3 == 0:
        return ("-- @merge_strategy: incremental\n-- @unique_key: id\n-- @watermark_column: updated_at\n"
                f"SELECT id, amount, lower(category) AS category, updated_at\nFROM {{{{ ref('{upstream}') }}}}\n"
                "{% if is_incremental() and watermark_value %}\n"
                "WHERE updated_at > TIMESTAMP '{{ watermark_value }}'\n{% endif %}\n")
    return (f"-- @description: cleaned {ref}\n"
            f"SELECT id, amount, lower(category) AS category, updated_at\nFROM {{{{ ref('{upstream}') }}}}\n"
            "WHERE amount IS NOT NULL\n")


def _gold_sql(ups: list[str]) -> str:
    first = ups[0]
    lines = ["-- @description: a mart joining its sources by id",
             "SELECT a.id, a.category, a.amount AS amount_0"]
    lines += [f"     , t{i}.amount AS amount_{i}" for i in range(1, len(ups))]
    lines.append(f"FROM {{{{ ref('{first}') }}}} AS a")
    lines += [f"LEFT JOIN {{{{ ref('{up}') }}}} AS t{i} ON t{i}.id = a.id" for i, up in enumerate(ups[1:], 1)]
    return "\n".join(lines) + "\n"


def _test_sql(index: int) -> list[tuple[str, str]]:
    tests = [("unique_id.sql", "SELECT id, COUNT(*) AS c FROM {{ this }} GROUP BY id HAVING COUNT(*) > 1\n")]
    if index % 2 == 0:
        tests.append(("has_category.sql", "-- @severity: warn\nSELECT id FROM {{ this }} WHERE category IS NULL\n"))
    return tests


def generate_project(root: Path, pipelines: int, *, rows_per_file: int = 4) -> Path:
    """Write a project of `pipelines` pipelines under `root` (created; must be empty or absent)."""
    root.mkdir(parents=True, exist_ok=True)
    spaces = plan(pipelines)
    first = next(iter(spaces))
    (root / "ratui.yaml").write_text(
        f"# a generated project of {pipelines} pipelines (tests/scale_project.py)\nnamespace: {first}\n"
        "spark:\n  master: local[2]\n  config:\n    spark.sql.shuffle.partitions: 2\n    spark.driver.memory: 2g\n")
    for ns, items in spaces.items():
        zones = sorted({z for _, _, _, zs in items for z in zs})
        for z, zone in enumerate(zones):
            folder = root / ns / "landing" / zone
            folder.mkdir(parents=True, exist_ok=True)
            rows = "".join(f"{z * 100 + r},{(z + r) % 97}.5,Cat{r % 3},2026-01-0{1 + r % 9} 00:00:00\n"
                           for r in range(rows_per_file))
            (folder / "part-0001.csv").write_text("id,amount,category,updated_at\n" + rows)
        for index, (layer, name, ups, zs) in enumerate(items):
            folder = root / ns / "pipelines" / layer / name
            (folder / "tests" / "quality").mkdir(parents=True, exist_ok=True)
            if layer == "bronze":
                sql = _bronze_sql(zs[0])
            elif layer == "silver":
                sql = _silver_sql(index, ups[0])
            else:
                sql = _gold_sql(ups)
            (folder / "pipeline.sql").write_text(sql)
            if index % 5 == 1:
                (folder / "config.yaml").write_text(
                    f"description: {layer} {name} of {ns}\ntags: [generated, {layer}]\n")
            for test_name, text in _test_sql(index):
                (folder / "tests" / "quality" / test_name).write_text(text)
    return root


def all_keys(pipelines: int) -> list[str]:
    return [f"{ns}.{layer}.{name}" for ns, items in plan(pipelines).items() for layer, name, _, _ in items]


def seed_runs(root: Path, runs: int, *, pipelines: list[str] | None = None) -> None:
    """Write `runs` finished runs into the project's history (as the console reads them), oldest first."""
    from ratui.engine.state.history import History

    keys = pipelines or all_keys(1500)
    history = History(root / ".ratui" / "ratui.db")
    start = datetime(2025, 1, 1, tzinfo=timezone.utc)
    batch: list[dict] = []
    for i in range(runs):
        at = (start + timedelta(seconds=30 * i)).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        status = "failed" if i % 17 == 0 else "cancelled" if i % 29 == 0 else "success"
        duration = 1500 + (i * 37) % 9000
        batch.append({
            "id": f"{i:012d}{i % 4096:06x}", "pipeline": keys[i % len(keys)], "status": status,
            "trigger": "cron", "strategy": "full_refresh", "queued_at": at, "started_at": at, "finished_at": at,
            "duration_ms": duration, "rows_written": 0 if status != "success" else 1000 + i % 5000, "warnings": 0,
            "phases": json.dumps({"branch": 20, "config": 10, "build": duration // 2, "write": duration // 4,
                                  "quality": duration // 5, "resolve": 20}),
            "error_code": "RAT-SQL-001" if status == "failed" else None,
        })
        if len(batch) == 20_000:
            history.db["runs"].insert_all(batch)
            batch = []
    if batch:
        history.db["runs"].insert_all(batch)
    history.close()


def fill_zone(folder: Path, files: int, *, rows: int = 2) -> Path:
    """A landing zone folder of `files` small CSV files (part-000001.csv ...)."""
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(files):
        body = "".join(f"{i * rows + r},{r}.5,Cat{r % 3},2026-01-01 00:00:00\n" for r in range(rows))
        (folder / f"part-{i:06d}.csv").write_text("id,amount,category,updated_at\n" + body)
    return folder
