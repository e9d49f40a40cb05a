"""Staging an object-store landing zone: 1,000 small objects listed and fetched by ratui, beside plain boto3.

Starts moto's S3 server on 127.0.0.1 (a real HTTP endpoint, its own process), uploads N small CSV objects, then
measures in the same run:

    ratui        S3Zone.list() + S3Zone.fetch() (what a run does before Spark reads the zone): paginated listing,
                 `concurrency` downloads at a time (default 8), each pinned to the listed ETag
    naive        the loop one writes by hand: list_objects_v2 pages, then download_file one object after another
    ratui x1     ratui's fetch with concurrency 1 (what the pool buys)

    python benchmarks/s3_staging.py [--objects 1000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "engine"))

from s3_server import moto_server, s3_client  # noqa: E402

from ratui.engine.landing.s3 import S3Zone  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--objects", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    os.environ.update({"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "AWS_DEFAULT_REGION": "us-east-1"})
    print(f"load average before: {os.getloadavg()}")
    work = Path(tempfile.mkdtemp(prefix="ratui-s3-bench-"))
    try:
        with moto_server(work / "logs") as endpoint:
            client = s3_client(endpoint)
            client.create_bucket(Bucket="bench")
            with ThreadPoolExecutor(16) as pool:
                list(pool.map(lambda i: client.put_object(Bucket="bench", Key=f"zone/f{i:05d}.csv",
                                                           Body=f"id,name\n{i},name-{i}\n".encode()),
                              range(args.objects)))
            figures: dict[str, list[float]] = {"ratui": [], "naive": [], "ratui x1": []}
            for attempt in range(args.repeat):
                for label in figures:
                    dest = work / f"{label.replace(' ', '')}-{attempt}"
                    began = time.perf_counter()
                    if label == "naive":
                        keys = []
                        for page in client.get_paginator("list_objects_v2").paginate(Bucket="bench", Prefix="zone/"):
                            keys += [o["Key"] for o in page.get("Contents", [])]
                        dest.mkdir(parents=True)
                        for key in keys:
                            client.download_file("bench", key, str(dest / key.rsplit("/", 1)[-1]))
                        count = len(keys)
                    else:
                        zone = S3Zone("bench", "zone/", endpoint_url=endpoint, name="zone",
                                      concurrency=8 if label == "ratui" else 1)
                        listed = zone.list()
                        count = len(zone.fetch(listed, dest))
                    figures[label].append(time.perf_counter() - began)
                    assert count == args.objects, (label, count)
                    shutil.rmtree(dest)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    ratui, naive = statistics.median(figures["ratui"]), statistics.median(figures["naive"])
    print(f"{args.objects} objects, median of {args.repeat}:")
    print(f"  ratui list + fetch (8 at a time)   {ratui:6.2f} s   {args.objects / ratui:7.0f} objects/s")
    print(f"  ratui, one at a time               {statistics.median(figures['ratui x1']):6.2f} s")
    print(f"  naive boto3 list + download_file   {naive:6.2f} s   ratui is {naive / ratui:.2f}x faster")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
