"""`ratui init DIR`: a small project that runs as it is, to start from."""

from __future__ import annotations

import re
from pathlib import Path

from ratui.engine.errors import RatuiError
from ratui.engine.project.names import check_name

FILES = {
    "ratui.yaml": """\
# ratui project settings
namespace: {ns}
spark:
  # Where Spark runs. local[*]: inside ratui's own process, on every core of this machine.
  # spark://HOST:7077: on a Spark standalone cluster, ratui being the driver.
  # For a Spark Connect server, replace `master` with `remote: sc://HOST:15002` (no JVM in ratui then; the
  # Connect client is part of ratui's install). With neither `master` nor `remote` here, SPARK_REMOTE names the server.
  # A cluster's executors and a Connect server read and write this folder: they must see it at the same path.
  master: local[*]
  config:                   # on Spark Connect only the spark.sql.* settings apply: the server owns the rest
    spark.sql.shuffle.partitions: 4
    spark.driver.memory: 2g
run:
  threads: 2                # independent pipelines of one `ratui run` at once (--threads overrides)
""",
    ".gitignore": ".ratui/\n*/warehouse/\n*/landing/*/_processed/\n",
    "{ns}/landing/signups/signups_001.csv": """\
signup_id,email,plan,signed_up_at
1,ada@example.com,free,2026-01-01 09:00:00
2,grace@example.com,pro,2026-01-01 10:30:00
3,alan@example.com,free,2026-01-02 08:15:00
4,edsger@example.com,team,2026-01-02 17:45:00
""",
    "{ns}/pipelines/bronze/raw_signups/pipeline.sql": """\
-- @merge_strategy: full_refresh
-- @description: Every signup file of the landing zone, as it arrived
SELECT * FROM {{ landing_zone('signups') }}
""",
    "{ns}/pipelines/silver/signups/pipeline.sql": """\
-- @merge_strategy: incremental
-- @unique_key: signup_id
-- @watermark_column: signed_up_at
-- @description: One row per signup, latest version wins
SELECT
  CAST(signup_id AS BIGINT)        AS signup_id,
  LOWER(TRIM(email))               AS email,
  plan,
  CAST(signed_up_at AS TIMESTAMP)  AS signed_up_at
FROM {{ ref('bronze.raw_signups') }}
{% if is_incremental() %}
WHERE CAST(signed_up_at AS TIMESTAMP) > TIMESTAMP '{{ watermark_value }}'
{% endif %}
""",
    "{ns}/pipelines/silver/signups/tests/quality/email_present.sql": """\
-- @severity: error
SELECT signup_id FROM {{ this }} WHERE email IS NULL OR email = ''
""",
}


def init_project(target: Path, namespace: str | None = None) -> Path:
    target = target.resolve()
    ns = namespace or re.sub(r"[^a-z0-9_-]", "_", target.name.lower()).lstrip("0123456789_-") or "main"
    check_name(ns, "namespace")
    if (target / "ratui.yaml").exists():
        raise RatuiError("RAT-CFG-007", f"{target} already holds a ratui.yaml", file=str(target / "ratui.yaml"),
                         hint="Pick an empty folder, or edit the existing project.")
    for rel, text in FILES.items():
        path = target / rel.format(ns=ns)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text.replace("{ns}", ns))
    return target
