"""The generated 1,500-pipeline project of the Lineage scale tests, with what a user can get wrong added: one gold
reading 300 silvers (a huge fan-in), a pipeline with no edges, and two silvers that read each other (a cycle: both
broken, the screen still opens)."""

from __future__ import annotations

from pathlib import Path

from tests.scale_project import all_keys, generate_project, seed_runs

SIZE = 1500
WIDE = "sales.gold.wide_mart"  # reads 300 silvers
LONELY = "sales.silver.lonely"  # reads nothing, read by nothing
LOOP = ("sales.silver.loop_a", "sales.silver.loop_b")  # each reads the other
FAN_IN = 300


def make_lineage_project(root: Path) -> Path:
    generate_project(root, SIZE)
    pipes = root / "sales" / "pipelines"
    silvers = [f"sales.silver.clean_{i:05d}" for i in range(FAN_IN)]
    sql = ["-- @description: one mart over 300 silvers", "SELECT a.id, a.amount"]
    sql.append(f"FROM {{{{ ref('{silvers[0]}') }}}} AS a")
    sql += [f"LEFT JOIN {{{{ ref('{s}') }}}} AS t{i} ON t{i}.id = a.id" for i, s in enumerate(silvers[1:], 1)]
    (pipes / "gold" / "wide_mart").mkdir(parents=True)
    (pipes / "gold" / "wide_mart" / "pipeline.sql").write_text("\n".join(sql) + "\n")
    (pipes / "silver" / "lonely").mkdir(parents=True)
    (pipes / "silver" / "lonely" / "pipeline.sql").write_text("SELECT 1 AS id\n")
    for me, other in (LOOP, LOOP[::-1]):
        folder = pipes / "silver" / me.rsplit(".", 1)[1]
        folder.mkdir(parents=True)
        (folder / "pipeline.sql").write_text(f"SELECT id FROM {{{{ ref('{other}') }}}}\n")
    seed_runs(root, 3000, pipelines=all_keys(SIZE))  # colours: success, failed and cancelled runs
    return root
