"""Spark's S3 connector (Hadoop's S3A): its jars, declared once, and each session's bucket settings.

pyspark's wheel carries Hadoop's client jars but not `hadoop-aws` (S3A) nor what it calls. CONNECTOR lists, per
Hadoop version a pyspark ships, every jar S3A needs (hadoop-aws, the AWS SDK bundle and the analytics accelerator its
build names): a JVM of ratui's own takes exactly these, docs/team/s3.md and docs/team/spark.md give a user exactly
these (docs/generate.py writes the commands from this list: spark/server_setup.py), and the tests start their Spark
Connect servers with exactly these (tests/servers.py). When the project needs Spark to reach S3 (an s3:// warehouse,
or landing zones Spark reads straight from their bucket), a JVM ratui starts gets, unless ratui.yaml's spark.jars /
spark.jars.packages already name hadoop-aws:

    the jars in the local Maven repository (~/.m2, or RATUI_MAVEN_REPO): what `mvn dependency:get` fetches, and
        what .ci/run fetches;
    else spark.jars.packages=org.apache.hadoop:hadoop-aws:{version}: Spark's own resolution from Maven Central at
        start (needs the internet; the jars are then cached under ~/.ivy2).

`s3://` URIs (what Iceberg metadata stores, and what other engines read) are served by S3A (fs.s3.impl). A Spark
Connect server or a cluster's executors have jars of their own: a missing connector is RAT-S3-005, and a class
missing from it names its jar (jar_of). Each bucket's endpoint, addressing and key go on the session
(fs.s3a.bucket.{bucket}.*), so one JVM can reach a landing bucket and a warehouse with different settings.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
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


@dataclass(frozen=True)
class Jar:
    """One jar of Maven Central, and the Java packages whose classes it carries (slash-separated)."""

    group: str
    artifact: str
    version: str
    packages: tuple[str, ...] = ()

    @property
    def coordinates(self) -> str:
        return f"{self.group}:{self.artifact}:{self.version}"

    @property
    def file_name(self) -> str:
        return f"{self.artifact}-{self.version}.jar"

    def path(self, repo: Path | str) -> Path:
        """Where Maven keeps it under `repo` (a local repository such as ~/.m2/repository)."""
        return Path(repo) / self.group.replace(".", "/") / self.artifact / self.version / self.file_name

    def carries(self, class_name: str) -> bool:
        """Whether a class (dotted or slashed name) is one of this jar's."""
        slashed = class_name.replace(".", "/")
        return any(slashed.startswith(package + "/") for package in self.packages)


# Every jar S3A needs, per Hadoop version of pyspark's client jars: hadoop-aws of that version, and the AWS SDK bundle
# and analytics accelerator that Hadoop's build names (hadoop-project's POM: aws-java-sdk-v2.version,
# amazon-s3-analyticsaccelerator-s3.version). Hadoop 3.5.0's S3A fails every read without the accelerator
# (NoClassDefFoundError: software/amazon/s3/analyticsaccelerator/...).
CONNECTOR: dict[str, tuple[Jar, ...]] = {
    "3.5.0": (
        Jar("org.apache.hadoop", "hadoop-aws", "3.5.0", ("org/apache/hadoop/fs/s3a", "org/apache/hadoop/fs/s3native")),
        Jar("software.amazon.awssdk", "bundle", "2.35.4", ("software/amazon/awssdk", "software/amazon/eventstream")),
        Jar("software.amazon.s3.analyticsaccelerator", "analyticsaccelerator-s3", "1.3.1",
            ("software/amazon/s3/analyticsaccelerator", "software/amazon/s3/shaded")),
    ),
}
POM_VERSIONS = ("aws-java-sdk-v2.version", "amazon-s3-analyticsaccelerator-s3.version")  # what CONNECTOR follows


def _pom_property(pom: Path, name: str) -> str | None:
    try:
        match = re.search(rf"<{re.escape(name)}>([^<]+)</{re.escape(name)}>", pom.read_text(errors="replace"))
    except OSError:
        return None
    return match.group(1).strip() if match else None


def connector_jars(version: str | None = None, repo: Path | None = None) -> tuple[Jar, ...]:
    """Every jar S3A of this Hadoop version needs: CONNECTOR's, or for a Hadoop version it does not list (another
    pyspark), hadoop-aws and what hadoop-project's POM in the local Maven repository names."""
    version = version or hadoop_version()
    if version in CONNECTOR:
        return CONNECTOR[version]
    declared = next(iter(CONNECTOR.values()))
    pom = (repo or maven_repo()) / f"org/apache/hadoop/hadoop-project/{version}/hadoop-project-{version}.pom"
    found = [Jar(declared[0].group, declared[0].artifact, version, declared[0].packages)]
    for template, prop in zip(declared[1:], POM_VERSIONS):
        named_version = _pom_property(pom, prop)
        if named_version:
            found.append(Jar(template.group, template.artifact, named_version, template.packages))
    return tuple(found)


def local_jars(version: str | None = None, repo: Path | None = None) -> list[Path] | None:
    """The connector's jars (connector_jars) in a local Maven repository, or None when any is missing."""
    repo = repo or maven_repo()
    jars = [jar.path(repo) for jar in connector_jars(version, repo)]
    return jars if len(jars) > 1 and all(jar.is_file() for jar in jars) else None


def jar_of(class_name: str) -> Jar | None:
    """The connector's jar that carries a class (any Hadoop version CONNECTOR lists: the one pyspark ships first)."""
    for jar in connector_jars():
        if jar.carries(class_name):
            return jar
    return None


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
    jars = connector_jars(version)
    return (f"Spark needs Hadoop's S3A connector for s3://: {', '.join(j.file_name for j in jars)}. With the internet "
            f"ratui asks Spark to fetch it (spark.jars.packages: org.apache.hadoop:hadoop-aws:{version}); offline, "
            "fetch each once with `mvn dependency:get -Dartifact=GROUP:ARTIFACT:VERSION -Dtransitive=false` ("
            + ", ".join(j.coordinates for j in jars) + ") or name the jars on disk in ratui.yaml's spark.config "
            "spark.jars. A Spark Connect server or a cluster needs all of them on its own classpath (--jars): "
            "docs/team/s3.md.")
