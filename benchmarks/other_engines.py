"""Reading one table of the sample four ways, in one process, after one warm-up of each: the Python API's
`p.table(...).to_arrow()` (PyIceberg on the catalog, no JVM) is the reference; beside it `p.sql(...).to_arrow()`
(Spark, warm), PyIceberg's RestCatalog through `ratui serve`'s Iceberg REST catalog (a real server in a subprocess),
and DuckDB's iceberg extension through the same server (when the duckdb wheels of the test extras are installed).

Also: `ratui.open()` and its first table read in a fresh process (no JVM), beside `ratui query` of the same
table (a fresh process that starts Spark): what a notebook's first cell pays. Medians of --repeat rounds, the
methods alternating; the load average before and after (`uptime`).

    python benchmarks/other_engines.py [--repeat 5] [--table silver.clean_orders]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def timed(work):
    began = time.perf_counter()
    value = work()
    return time.perf_counter() - began, value


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def duckdb_reader(url: str, token: str):
    try:
        import glob

        import duckdb
        import duckdb_extension_avro
        import duckdb_extension_httpfs
        import duckdb_extension_iceberg
    except ImportError:
        return None
    con = duckdb.connect(config={"autoinstall_known_extensions": "false", "autoload_known_extensions": "false"})
    for module in (duckdb_extension_httpfs, duckdb_extension_avro, duckdb_extension_iceberg):
        path = glob.glob(os.path.dirname(module.__file__) + "/extensions/*/*.duckdb_extension")[0]
        con.execute(f"LOAD '{path}'")
    con.execute(f"CREATE SECRET ratui (TYPE ICEBERG, TOKEN '{token}')")
    con.execute(f"ATTACH 'main' AS lake (TYPE ICEBERG, ENDPOINT '{url}', SECRET ratui)")
    return con


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--table", default="silver.clean_orders")
    args = parser.parse_args()
    print(f"load before: {uptime()}")
    import ratui

    work = Path(tempfile.mkdtemp(prefix="ratui-bench-engines-"))
    root = work / "sample"
    shutil.copytree(REPO / "sample_project", root,
                    ignore=shutil.ignore_patterns(".ratui", "warehouse", "_processed", "__pycache__"))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    serve = None
    try:
        with ratui.open(root) as p:
            result = p.run("+" + args.table, wait=True)
            if result.status != "success":
                raise SystemExit(f"the sample's run of +{args.table} did not succeed: {result.status}")
            layer, name = args.table.split(".")
            namespace = p.pipelines[0].namespace
            rows = p.table(args.table).to_arrow().num_rows
            print(f"table {args.table}: {rows:,} rows")

            port = free_port()
            serve = subprocess.Popen([sys.executable, "-m", "ratui", "serve", "--project", str(root), "--port",
                                      str(port), "--json"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True, env=env)
            serving = json.loads(serve.stdout.readline())
            url, token = serving["url"], serving["token"]
            from pyiceberg.catalog.rest import RestCatalog

            rest = RestCatalog("ratui", uri=url, token=token)
            duck = duckdb_reader(url, token)
            methods = {
                "API table().to_arrow() (PyIceberg, no JVM)": lambda: p.table(args.table).to_arrow().num_rows,
                "API sql().to_arrow() (Spark, warm)":
                    lambda: p.sql(f"SELECT * FROM {args.table}").to_arrow().num_rows,
                "PyIceberg RestCatalog via ratui serve":
                    lambda: rest.load_table((namespace, layer, name)).scan().to_arrow().num_rows,
            }
            if duck is not None:
                methods["DuckDB iceberg extension via ratui serve"] = lambda: duck.execute(
                    f'SELECT * FROM lake."{namespace}.{layer}".{name}').to_arrow_table().num_rows
            else:
                print("DuckDB: not installed (pip install '.[test]' brings its wheels): not measured")
            times: dict[str, list[float]] = {m: [] for m in methods}
            for method, read in methods.items():  # warm-up: imports, the JIT, the server's first answers
                _, got = timed(read)
                if got != rows:
                    raise SystemExit(f"{method} read {got} rows, not {rows}")
            for i in range(args.repeat):
                order = list(methods) if i % 2 == 0 else list(reversed(methods))
                for method in order:
                    seconds, got = timed(methods[method])
                    assert got == rows
                    times[method].append(seconds)
            reference = statistics.median(times[next(iter(methods))])
            print(f"\nwarm reads of {args.table} ({rows:,} rows), median of {args.repeat}:")
            for method, values in times.items():
                median = statistics.median(values)
                print(f"  {method:<46} {median * 1000:8.1f} ms  {median / reference:5.2f}x")

        # a notebook's first cell: a fresh process
        first_api = [sys.executable, "-c", f"import ratui; p = ratui.open({str(root)!r}); "
                     f"print(p.table({args.table!r}).to_arrow().num_rows)"]
        first_query = [sys.executable, "-m", "ratui", "query", f"SELECT count(*) AS n FROM {args.table}",
                       "--project", str(root), "--format", "json"]
        firsts: dict[str, list[float]] = {"fresh process: ratui.open() + table().to_arrow()": [],
                                          "fresh process: ratui query (starts Spark)": []}
        for _ in range(max(2, args.repeat // 2)):
            for label, command in zip(firsts, (first_api, first_query)):
                seconds, proc = timed(lambda c=command: subprocess.run(c, capture_output=True, text=True, env=env))
                if proc.returncode != 0:
                    raise SystemExit(f"{label} failed: {proc.stderr[-400:]}")
                firsts[label].append(seconds)
        reference = statistics.median(firsts["fresh process: ratui.open() + table().to_arrow()"])
        print("\na first read in a new process, median:")
        for label, values in firsts.items():
            median = statistics.median(values)
            print(f"  {label:<52} {median:6.2f} s  {median / reference:5.2f}x")
    finally:
        if serve is not None:
            serve.terminate()
            serve.wait(timeout=30)
        shutil.rmtree(work, ignore_errors=True)
    print(f"\nload after: {uptime()}")


if __name__ == "__main__":
    main()
