"""Spark's S3 connector (Hadoop's S3A): its jars for a JVM of ratui's own, and each session's bucket settings.

pyspark's wheel carries Hadoop's client jars but not `hadoop-aws` (S3A) nor the AWS SDK it calls. When the project
needs Spark to reach S3 (an s3:// warehouse, or landing zones Spark reads straight from their bucket), a JVM ratui
starts gets, unless ratui.yaml's spark.jars / spark.jars.packages already name hadoop-aws:

    the jars in the local Maven repository (~/.m2, or RATUI_MAVEN_REPO): hadoop-aws of the Hadoop version pyspark
        ships, and the AWS SDK bundle (and analytics accelerator) it was built with; what `mvn dependency:get`
        fetches, and what .ci/run fetches;
    else spark.jars.packages=org.apache.hadoop:hadoop-aws:{version}: Spark's own resolution from Maven Central at
        start (needs the internet; the jars are then cached under ~/.ivy2).

`s3://` URIs (what Iceberg metadata stores, and what other engines read) are served by S3A (fs.s3.impl). A Spark
Connect server or a cluster's executors have jars of their own: docs/team/s3.md says what they need, and a
missing connector is RAT-S3-005 with how to get it. Each bucket's endpoint, addressing and key go on the session
(fs.s3a.bucket.{bucket}.*), so one JVM can reach a landing bucket and a warehouse with different settings.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

S3A_CLASS = "org.apache.hadoop.fs.s3a.S3AFileSystem"
# s3:// served by S3A; uploads buffered in memory, not in files on a local disk: S3A's disk buffer needs Hadoop's
# checksummed LocalFileSystem, and ratui runs file:// as the raw one (no .crc side files in table folders)
SCHEME_CONF = {"fs.s3.impl": S3A_CLASS, "fs.s3a.impl": S3A_CLASS, "fs.s3a.fast.upload.buffer": "bytebuffer"}


def hadoop_version() -> str:
    """The Hadoop version of pyspark's own client jars (hadoop-client-api-X.Y.Z.jar)."""
    import pyspark

    jars = Path(pyspark.__file__).resolve().parent / "jars"
    for jar in sorted(jars.glob("hadoop-client-api-*.jar")):
        match = re.match(r"hadoop-client-api-(\d+\.\d+\.\d+)\.jar$", jar.name)
        if match:
            return match.group(1)
    return "3.4.1"


def maven_repo() -> Path:
    return Path(os.environ.get("RATUI_MAVEN_REPO") or Path.home() / ".m2" / "repository")


def _pom_property(pom: Path, name: str) -> str | None:
    try:
        match = re.search(rf"<{re.escape(name)}>([^<]+)</{re.escape(name)}>", pom.read_text(errors="replace"))
    except OSError:
        return None
    return match.group(1).strip() if match else None


def local_jars(version: str | None = None, repo: Path | None = None) -> list[Path] | None:
    """hadoop-aws and the SDK jars it needs from a local Maven repository, or None when any is missing."""
    version = version or hadoop_version()
    repo = repo or maven_repo()
    hadoop = repo / "org/apache/hadoop"
    aws = hadoop / f"hadoop-aws/{version}/hadoop-aws-{version}.jar"
    project = hadoop / f"hadoop-project/{version}/hadoop-project-{version}.pom"
    sdk = _pom_property(project, "aws-java-sdk-v2.version")
    candidates = sorted((repo / "software/amazon/awssdk/bundle").glob("*/bundle-*.jar"))
    bundle = repo / f"software/amazon/awssdk/bundle/{sdk}/bundle-{sdk}.jar" if sdk else \
        (candidates[-1] if candidates else None)
    if not aws.is_file() or bundle is None or not bundle.is_file():
        return None
    jars = [aws, bundle]
    accel = _pom_property(project, "amazon-s3-analyticsaccelerator-s3.version")
    if accel:
        extra = repo / f"software/amazon/s3/analyticsaccelerator/analyticsaccelerator-s3/{accel}/" \
                       f"analyticsaccelerator-s3-{accel}.jar"
        if extra.is_file():
            jars.append(extra)
    return jars


def named(spark_config: dict[str, str]) -> bool:
    """Whether ratui.yaml already gives Spark the connector (spark.jars or spark.jars.packages name hadoop-aws)."""
    return any("hadoop-aws" in spark_config.get(key, "") for key in ("spark.jars", "spark.jars.packages"))


def launch_conf(spark_config: dict[str, str]) -> dict[str, str]:
    """Settings a JVM of ratui's own starts with when Spark must reach S3: the connector's jars and s3://."""
    conf = {f"spark.hadoop.{k}": v for k, v in SCHEME_CONF.items()}
    if named(spark_config):
        return conf
    jars = local_jars()
    if jars is not None:
        given = spark_config.get("spark.jars", "")
        conf["spark.jars"] = ",".join([*(j for j in given.split(",") if j), *map(str, jars)])
    else:
        given = spark_config.get("spark.jars.packages", "")
        conf["spark.jars.packages"] = ",".join([*(p for p in given.split(",") if p),
                                                f"org.apache.hadoop:hadoop-aws:{hadoop_version()}"])
    return conf


def session_conf(settings: Any) -> dict[str, str]:
    """The S3A settings a run's session needs: s3:// served by S3A, and each bucket Spark reads or writes."""
    buckets = buckets_spark_reaches(settings)
    if not buckets:
        return {}
    conf = dict(SCHEME_CONF)
    for access in buckets:
        conf.update(access.spark_conf())
    return conf


def buckets_spark_reaches(settings: Any) -> list[Any]:
    """How to reach each bucket Spark itself reads or writes: the warehouse's, and the landing zones' it reads in
    place (reads_in_place)."""
    out = []
    warehouse = settings.object_warehouse()
    if warehouse is not None and warehouse.s3 is not None:
        out.append(warehouse.s3)
    if reads_in_place(settings):
        seen = {a.bucket for a in out}
        for zone in settings.remote_zones.values():
            if zone.bucket not in seen:
                seen.add(zone.bucket)
                out.append(zone.access)
    return out


def spark_is_local(settings: Any) -> bool:
    """Whether Spark runs in ratui's own JVM on this machine (local[N]): everything else (a cluster's executors, a
    Connect server) may not see this machine's disk (Settings.spark_is_local)."""
    return bool(settings.spark_is_local)


def reads_in_place(settings: Any) -> bool:
    """Whether Spark reads S3 landing zones straight from their bucket (landing.s3_read: auto -> when Spark is not
    local; in place / staged as set): Settings.zones_read_in_place, which landing/zone.py gives each zone."""
    return bool(settings.zones_read_in_place)


def needs_connector(settings: Any) -> bool:
    return bool(buckets_spark_reaches(settings))


def hint() -> str:
    version = hadoop_version()
    return (f"Spark needs Hadoop's S3A connector for s3:// (hadoop-aws {version} and the AWS SDK bundle it names). "
            f"With the internet ratui asks Spark to fetch it (spark.jars.packages: org.apache.hadoop:hadoop-aws:"
            f"{version}); offline, fetch it once with `mvn dependency:get -Dartifact=org.apache.hadoop:hadoop-aws:"
            f"{version}` (and software.amazon.awssdk:bundle) or name the jars on disk in ratui.yaml's spark.config "
            "spark.jars. A Spark Connect server or a cluster needs them on its own classpath (--packages).")
