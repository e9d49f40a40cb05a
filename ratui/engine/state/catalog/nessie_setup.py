"""What a Nessie server needs for ratui, and the command that starts it: declared once.

Nessie is a team's catalog (catalog.type: nessie). With the tables in an s3:// warehouse, Nessie's own Iceberg REST
catalog (`/iceberg/{ref}`) can serve them to other engines too, once Nessie knows the warehouse and how to reach its
bucket: iceberg_properties() derives those settings from ratui.yaml's catalog section (the warehouse, the endpoint,
path-style addressing, the region), and the key goes to Nessie as a secret it reads from its environment
(secret_env(): never on its command line). docs/generate.py writes the commands into docs/team/nessie.md (blocks()),
and the tests start their Nessie servers with command() and those settings (tests/nessie_server.py): what the docs
tell a team is what the tests run.
"""

from __future__ import annotations

import json
from typing import Any

from ratui.engine.shell_text import command as shell_command, exports

VERSION = "0.99.0"
RUNNER = f"org.projectnessie.nessie:nessie-quarkus:{VERSION}:jar:runner"
RUNNER_PATH = f"org/projectnessie/nessie/nessie-quarkus/{VERSION}/nessie-quarkus-{VERSION}-runner.jar"
WAREHOUSE_NAME = "lake"  # the name Nessie gives the warehouse: `/iceberg/main` serves its default one
SECRET = "nessie.catalog.secrets.access-key"  # a secret of Nessie's own configuration ({"name", "secret"})
S3_OPTIONS = "nessie.catalog.service.s3.default-options"


def secret_env(access_key_id: str = "$AWS_ACCESS_KEY_ID",
               secret_access_key: str = "$AWS_SECRET_ACCESS_KEY") -> dict[str, str]:
    """The S3 key as Nessie's secret SECRET, in the environment variable Nessie reads it from: one value, the key's
    two halves as JSON (Nessie looks the secret up by its name alone, and an environment variable is found only so;
    `$NAME`s stay shell variables for the docs)."""
    name = SECRET.upper().replace(".", "_").replace("-", "_")
    return {name: json.dumps({"name": access_key_id, "secret": secret_access_key}, separators=(",", ":"))}


def iceberg_properties(warehouse: str, *, endpoint: str | None = None, region: str | None = None,
                       path_style: bool | None = None) -> dict[str, str]:
    """Nessie's settings for serving the tables of an s3:// `warehouse` through its Iceberg REST catalog: the default
    warehouse and its location, and how Nessie reaches the bucket (the key: secret_env)."""
    props = {
        "nessie.catalog.default-warehouse": WAREHOUSE_NAME,
        f"nessie.catalog.warehouses.{WAREHOUSE_NAME}.location": warehouse,
    }
    if endpoint:
        props[f"{S3_OPTIONS}.endpoint"] = endpoint
    if path_style if path_style is not None else bool(endpoint):  # ratui's own default (storage/s3.py)
        props[f"{S3_OPTIONS}.path-style-access"] = "true"
    if region:
        props[f"{S3_OPTIONS}.region"] = region
    props[f"{S3_OPTIONS}.access-key"] = f"urn:nessie-secret:quarkus:{SECRET}"
    return props


def properties_for(settings: Any) -> dict[str, str]:
    """iceberg_properties() of a project's ratui.yaml (catalog.warehouse: s3://..., catalog.s3); {} when its tables
    are in a folder (Nessie's Iceberg REST serves no file:// warehouse)."""
    warehouse = settings.object_warehouse()
    if warehouse is None or warehouse.s3 is None:
        return {}
    s3 = warehouse.s3
    return iceberg_properties(warehouse.url, endpoint=s3.endpoint_url, region=s3.region_name,
                              path_style=s3.path_style_access)


def command(properties: dict[str, str], *, java: str = "java", jar: str = f"$HOME/.m2/repository/{RUNNER_PATH}",
            jvm: list[str] | None = None) -> list[str]:
    """Nessie's runner jar started with these settings (`jvm`: more of the JVM's own options)."""
    return [java, *(jvm or []), *(f"-D{k}={v}" for k, v in properties.items()), "-jar", jar]


EXAMPLE = {"warehouse": "s3://lake/analytics", "endpoint": "http://minio:9000", "region": "eu-west-1"}


def blocks() -> dict[str, str]:
    """The Markdown blocks docs/generate.py writes into docs/team/nessie.md."""
    fetch = f"mvn -q dependency:get -Dartifact={RUNNER} -Dtransitive=false"
    plain = "\n".join([fetch, shell_command(command({}), breaks=("-D",))])
    env = exports(secret_env())
    served = "\n".join([*env, shell_command(command(iceberg_properties(
        EXAMPLE["warehouse"], endpoint=EXAMPLE["endpoint"], region=EXAMPLE["region"], path_style=True)),
                                         breaks=("-D", "-jar"))])
    return {"nessie-server": f"```sh\n{plain}\n```", "nessie-iceberg-s3": f"```sh\n{served}\n```"}
