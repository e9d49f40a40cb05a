#!/usr/bin/env python3
"""Deterministic generator for the landing files of the ratui sample project.

    python generate_data.py              # (re)write every bundled landing file, byte-identical each time
    python generate_data.py --month 4    # write one more orders file: orders_2026_04.csv (N = 4..12)
    python generate_data.py --root DIR   # write under DIR instead of the folder holding this script

Nothing here reads the clock: every value comes from seeded random.Random streams and fixed base dates.
Only the standard library and pyarrow (for products.parquet) are used.

What the data looks like, and the rules the pipelines and tests rely on:

* customers.csv  ~5,000 customers. About 1% have an empty or blank email (the warn-severity test in
  silver/clean_customers reports them). Some emails carry upper case or surrounding blanks and a few
  country codes are lower case, so the silver layer has real cleaning to do.
* products.parquet  500 products, unit_price stored as decimal(10,2).
* orders_2026_MM.csv  12,000 rows per month. Month 1 holds only new orders; every later month re-lists
  1,500 earlier orders with a new status and an updated_at inside that month (so strictly later than any
  earlier version), plus new orders. Within one file an order appears once, except 20 deliberate
  duplicates carrying an older status and an older updated_at; the row order of each pair is random, so
  only "keep the latest updated_at" dedupes them correctly. A few status values are messy (case, blanks).
* events_2026_MM.jsonl  7,800 flat JSON objects per month, sorted by event_ts; every event of month N+1
  is later than every event of month N. An add_to_cart always follows a page_view of the same product in
  the same session, so carts never exceed views per product.
* orders/_samples/orders_sample.csv  5 preview rows (order_id 999995..999999) that pipelines must
  never read.

`--month N` replays months 1..N-1 in memory, so month N is the same whichever files exist on disk.
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import sys
from datetime import date, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

SEED = "ratui-sample-v1"
YEAR = 2026
BUNDLED_MONTHS = (1, 2, 3)
MAX_MONTH = 12

N_CUSTOMERS = 5_000
N_PRODUCTS = 500
ORDER_ROWS_PER_FILE = 12_000
UPDATES_PER_MONTH = 1_500
RETURNS_PER_MONTH = 100          # part of the updates: delivered -> returned
IN_FILE_DUPLICATES = 20
EVENTS_PER_MONTH = 7_800
FIRST_ORDER_ID = 100_001
SAMPLE_ORDER_IDS = range(999_995, 1_000_000)

CENT = Decimal("0.01")
ORDER_COLUMNS = ["order_id", "customer_id", "product_id", "quantity", "unit_price",
                 "status", "order_date", "updated_at"]

FIRST_NAMES = [
    "Ada", "Alan", "Alice", "Amara", "Anna", "Arjun", "Ben", "Bianca", "Carlos", "Chen", "Chloe", "Daniel",
    "Diego", "Elena", "Emma", "Erik", "Fatima", "Felix", "Grace", "Hana", "Hugo", "Ines", "Isaac", "Ivan",
    "Jack", "Julia", "Kai", "Kenji", "Lara", "Leo", "Lina", "Lucas", "Maya", "Mia", "Mohammed", "Nadia",
    "Noah", "Nora", "Olga", "Omar", "Paula", "Pedro", "Priya", "Quinn", "Rosa", "Ruben", "Sara", "Sofia",
    "Tariq", "Theo", "Uma", "Victor", "Wei", "Yara", "Yusuf", "Zoe",
]
LAST_NAMES = [
    "Adams", "Almeida", "Becker", "Bianchi", "Brown", "Castro", "Chen", "Dubois", "Eriksson", "Fischer",
    "Garcia", "Gupta", "Hansen", "Ivanova", "Jansen", "Kim", "Kowalski", "Larsen", "Lopez", "Martin",
    "Meyer", "Moreau", "Nakamura", "Novak", "Okafor", "Olsen", "Patel", "Petrov", "Rossi", "Santos",
    "Schmidt", "Silva", "Smith", "Suzuki", "Tanaka", "Taylor", "Varga", "Wagner", "Wang", "Weber",
    "Williams", "Yilmaz", "Zhang",
]
EMAIL_DOMAINS = ["example.com", "mail.test", "inbox.test", "shop.example", "post.example"]
COUNTRIES = ["US", "GB", "DE", "FR", "NL", "ES", "IT", "CA", "AU", "SE", "PL", "BR", "JP", "IN"]
COUNTRY_WEIGHTS = [30, 12, 10, 8, 6, 6, 5, 5, 4, 3, 3, 3, 3, 2]

CATEGORIES = {
    # category: (sku prefix, price range in cents, nouns)
    "electronics": ("ELE", (1_999, 89_999), ["Headphones", "Speaker", "Charger", "Monitor", "Keyboard", "Webcam"]),
    "home": ("HOM", (499, 24_999), ["Lamp", "Rug", "Cushion", "Clock", "Mirror", "Shelf"]),
    "kitchen": ("KIT", (299, 19_999), ["Kettle", "Pan", "Knife Set", "Blender", "Mug", "Toaster"]),
    "books": ("BOO", (599, 5_999), ["Novel", "Cookbook", "Atlas", "Guide", "Anthology", "Workbook"]),
    "toys": ("TOY", (399, 14_999), ["Puzzle", "Robot", "Board Game", "Kite", "Blocks", "Plush"]),
    "sports": ("SPO", (799, 39_999), ["Yoga Mat", "Dumbbell", "Racket", "Helmet", "Bottle", "Backpack"]),
    "beauty": ("BEA", (299, 9_999), ["Serum", "Lotion", "Shampoo", "Perfume", "Brush", "Balm"]),
    "garden": ("GAR", (399, 29_999), ["Planter", "Hose", "Shears", "Seeds", "Lantern", "Bench"]),
}
ADJECTIVES = ["Classic", "Compact", "Deluxe", "Eco", "Essential", "Nordic", "Pro", "Smart", "Urban", "Vintage"]

NEW_STATUS_WEIGHTS = {"placed": 25, "shipped": 30, "delivered": 35, "cancelled": 7, "returned": 3}
NEXT_STATUS = {
    "placed": (["shipped", "delivered", "cancelled"], [50, 35, 15]),
    "shipped": (["delivered", "returned"], [92, 8]),
    "delivered": (["returned"], [1]),
}


def rng_for(*parts: object) -> random.Random:
    """One independent, reproducible stream per purpose (string seeds hash with SHA-512, not hash())."""
    return random.Random(":".join([SEED, *map(str, parts)]))


def month_bounds(month: int) -> tuple[datetime, datetime]:
    start = datetime(YEAR, month, 1)
    end = datetime(YEAR + 1, 1, 1) if month == 12 else datetime(YEAR, month + 1, 1)
    return start, end


def fmt_ts(ts: datetime) -> str:
    return ts.strftime("%Y-%m-%d %H:%M:%S")


def write_csv(path: Path, header: list[str], rows: list[list[object]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)


# ---------------------------------------------------------------------------------------------- customers

def make_customers() -> list[list[object]]:
    rng = rng_for("customers")
    rows = []
    for cid in range(1, N_CUSTOMERS + 1):
        first, last = rng.choice(FIRST_NAMES), rng.choice(LAST_NAMES)
        email = f"{first}.{last}{cid}@{rng.choice(EMAIL_DOMAINS)}".lower()
        roll = rng.random()
        if roll < 0.011:
            email = "" if rng.random() < 0.75 else "   "      # missing: empty or blank
        elif roll < 0.06:
            email = f"{first}.{last}{cid}@{rng.choice(EMAIL_DOMAINS)}"   # mixed case
        elif roll < 0.09:
            email = f" {email} "                            # stray blanks
        country = rng.choices(COUNTRIES, COUNTRY_WEIGHTS)[0]
        if rng.random() < 0.02:
            country = country.lower()
        signup = date(2023, 1, 1) + timedelta(days=rng.randrange(3 * 365))
        rows.append([cid, email, first, last, country, signup.isoformat()])
    return rows


# ----------------------------------------------------------------------------------------------- products

def make_products() -> list[dict]:
    rng = rng_for("products")
    names = list(CATEGORIES)
    products = []
    for pid in range(1, N_PRODUCTS + 1):
        category = names[(pid - 1) % len(names)]
        prefix, (lo, hi), nouns = CATEGORIES[category]
        products.append({
            "product_id": pid,
            "sku": f"{prefix}-{pid:05d}",
            "name": f"{rng.choice(ADJECTIVES)} {rng.choice(nouns)} {pid}",
            "category": category,
            "unit_price": (Decimal(rng.randint(lo, hi)) / 100).quantize(CENT),
            "active": rng.random() < 0.92,
        })
    return products


def write_products(path: Path, products: list[dict]) -> None:
    schema = pa.schema([
        ("product_id", pa.int64()),
        ("sku", pa.string()),
        ("name", pa.string()),
        ("category", pa.string()),
        ("unit_price", pa.decimal128(10, 2)),
        ("active", pa.bool_()),
    ])
    table = pa.Table.from_pylist(products, schema=schema)
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path, compression="snappy")


# ------------------------------------------------------------------------------------------------- orders

def messy(status: str, rng: random.Random) -> str:
    """About 1 status in 150 arrives with odd case or blanks; silver normalises them."""
    if rng.random() >= 1 / 150:
        return status
    return rng.choice([status.upper(), status.capitalize(), f" {status}", f"{status} "])


def order_row(oid: int, o: dict, status: str, updated_at: datetime, rng: random.Random) -> list[object]:
    return [oid, o["customer_id"], o["product_id"], o["quantity"], f"{o['unit_price']:.2f}",
            messy(status, rng), o["order_date"].isoformat(), fmt_ts(updated_at)]


def make_order_month(month: int, state: dict[int, dict], next_id: int,
                     products: list[dict]) -> tuple[list[list[object]], int]:
    """Rows of orders file `month`; updates `state` (order_id -> latest version) in place."""
    rng = rng_for("orders", month)
    start, end = month_bounds(month)
    month_seconds = int((end - start).total_seconds())
    rows: dict[int, list[list[object]]] = {}

    # 1. updates of earlier orders: a later status, an updated_at inside this month
    updated: list[int] = []
    if month > 1:
        open_ids = [i for i in sorted(state) if state[i]["status"] in ("placed", "shipped")]
        delivered_ids = [i for i in sorted(state) if state[i]["status"] == "delivered"]
        updated = rng.sample(open_ids, UPDATES_PER_MONTH - RETURNS_PER_MONTH)
        updated += rng.sample(delivered_ids, RETURNS_PER_MONTH)
        for oid in updated:
            o = state[oid]
            choices, weights = NEXT_STATUS[o["status"]]
            new_ts = start + timedelta(seconds=rng.randrange(60, month_seconds))
            assert new_ts > o["updated_at"], (oid, new_ts, o["updated_at"])
            o["previous"] = (o["status"], start)       # stale version usable as an in-file duplicate
            o["status"] = rng.choices(choices, weights)[0]
            o["updated_at"] = new_ts
            rows[oid] = [order_row(oid, o, o["status"], new_ts, rng)]

    # 2. new orders
    n_new = ORDER_ROWS_PER_FILE - len(updated) - IN_FILE_DUPLICATES
    new_ids = list(range(next_id, next_id + n_new))
    statuses, weights = list(NEW_STATUS_WEIGHTS), list(NEW_STATUS_WEIGHTS.values())
    for oid in new_ids:
        if rng.random() < 0.3:
            customer_id = rng.randint(1, 400)             # a loyal core orders more often
        else:
            customer_id = rng.randint(1, N_CUSTOMERS)
        product = products[min(int(rng.paretovariate(0.9)) - 1, N_PRODUCTS - 1) if rng.random() < 0.4
                           else rng.randrange(N_PRODUCTS)]
        price = product["unit_price"]
        if rng.random() < 0.1:
            price = (price * Decimal("0.90")).quantize(CENT, rounding=ROUND_HALF_UP)
        created = start + timedelta(seconds=rng.randrange(month_seconds))
        status = rng.choices(statuses, weights)[0]
        if status == "placed":
            updated_at = created
        else:
            updated_at = min(created + timedelta(seconds=rng.randint(3_600, 3 * 86_400)),
                             end - timedelta(seconds=1))
        o = {
            "customer_id": customer_id,
            "product_id": product["product_id"],
            "quantity": rng.choices([1, 2, 3, 4, 5], [55, 25, 10, 6, 4])[0],
            "unit_price": price,
            "status": status,
            "order_date": created.date(),
            "updated_at": updated_at,
            "previous": ("placed", created),
        }
        state[oid] = o
        rows[oid] = [order_row(oid, o, status, updated_at, rng)]

    # 3. in-file duplicates: an older version of the same order, earlier updated_at, same file
    new_with_history = [i for i in new_ids if state[i]["updated_at"] > state[i]["previous"][1]]
    upd_with_history = [i for i in updated if state[i]["updated_at"] > state[i]["previous"][1] + timedelta(minutes=1)]
    n_upd_dups = min(5, len(upd_with_history))
    dup_ids = rng.sample(upd_with_history, n_upd_dups) + rng.sample(new_with_history, IN_FILE_DUPLICATES - n_upd_dups)
    for oid in dup_ids:
        o = state[oid]
        old_status, lower = o["previous"]
        span = int((o["updated_at"] - lower).total_seconds())
        stale_ts = lower + timedelta(seconds=rng.randrange(span)) if month > 1 and oid in updated else lower
        assert stale_ts < o["updated_at"]
        stale = order_row(oid, o, old_status, stale_ts, rng)
        if rng.random() < 0.5:
            rows[oid].insert(0, stale)                  # the stale version first ...
        else:
            rows[oid].append(stale)                     # ... or last: file order must not matter
    for o in state.values():
        o.pop("previous", None)

    out = [row for oid in sorted(rows) for row in rows[oid]]
    assert len(out) == ORDER_ROWS_PER_FILE, len(out)
    return out, next_id + n_new


def order_months(last_month: int, products: list[dict]):
    """Yield (month, rows) for months 1..last_month, replaying the order history deterministically."""
    state: dict[int, dict] = {}
    next_id = FIRST_ORDER_ID
    for month in range(1, last_month + 1):
        rows, next_id = make_order_month(month, state, next_id, products)
        assert next_id < SAMPLE_ORDER_IDS.start
        yield month, rows


def orders_file(landing: Path, month: int) -> Path:
    return landing / "orders" / f"orders_{YEAR}_{month:02d}.csv"


def make_sample_orders() -> list[list[object]]:
    rng = rng_for("orders-sample")
    return [[oid, rng.randint(1, N_CUSTOMERS), rng.randint(1, N_PRODUCTS), 1, "9.99", "placed",
             "2026-01-15", "2026-01-15 12:00:00"] for oid in SAMPLE_ORDER_IDS]


# ------------------------------------------------------------------------------------------------- events

def make_events(month: int) -> list[dict]:
    rng = rng_for("events", month)
    start, end = month_bounds(month)
    usable = int((end - start).total_seconds()) - 3 * 3_600   # sessions end well before the month does
    sessions: list[list[tuple[datetime, int | None, str]]] = []
    total = 0
    while total < EVENTS_PER_MONTH:
        ts = start + timedelta(seconds=rng.randrange(usable))
        customer_id = rng.randint(1, N_CUSTOMERS)
        events: list[tuple[datetime, int | None, str]] = []

        def step() -> datetime:
            nonlocal ts
            ts += timedelta(seconds=rng.randint(3, 240))
            return ts

        for _ in range(rng.choices([0, 1, 2], [40, 45, 15])[0]):
            events.append((step(), None, "search"))
        cart = False
        for _ in range(rng.choices([1, 2, 3, 4, 5], [30, 30, 20, 12, 8])[0]):
            pid = (min(int(rng.paretovariate(0.9)), N_PRODUCTS) if rng.random() < 0.4
                   else rng.randint(1, N_PRODUCTS))
            events.append((step(), pid, "page_view"))
            if rng.random() < 0.22:
                events.append((step(), pid, "add_to_cart"))
                cart = True
        if cart and rng.random() < 0.55:
            events.append((step(), None, "checkout"))
        events = events[: EVENTS_PER_MONTH - total]     # trim the last session; views stay before carts
        total += len(events)
        sessions.append([(t, pid, kind, customer_id) for t, pid, kind in events])

    flat = []
    for sno, events in enumerate(sessions, start=1):
        for seq, (t, pid, kind, cid) in enumerate(events):
            flat.append((t, sno, seq, pid, kind, cid))
    flat.sort()
    out = []
    for n, (t, sno, _seq, pid, kind, cid) in enumerate(flat, start=1):
        assert start <= t < end
        out.append({
            "event_id": f"e{YEAR % 100}{month:02d}-{n:05d}",
            "event_ts": t.strftime("%Y-%m-%dT%H:%M:%S"),
            "customer_id": cid,
            "product_id": pid,
            "event_type": kind,
            "session_id": f"s{month:02d}-{sno:05d}",
        })
    return out


def write_jsonl(path: Path, records: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8", newline="\n") as fh:
        for rec in records:
            fh.write(json.dumps(rec, separators=(",", ":")) + "\n")


# --------------------------------------------------------------------------------------------------- main

def generate_bundled(landing: Path) -> list[Path]:
    written = []
    path = landing / "customers" / "customers.csv"
    write_csv(path, ["customer_id", "email", "first_name", "last_name", "country", "signup_date"],
              make_customers())
    written.append(path)

    products = make_products()
    path = landing / "products" / "products.parquet"
    write_products(path, products)
    written.append(path)

    for month, rows in order_months(max(BUNDLED_MONTHS), products):
        path = orders_file(landing, month)
        write_csv(path, ORDER_COLUMNS, rows)
        written.append(path)

    path = landing / "orders" / "_samples" / "orders_sample.csv"
    write_csv(path, ORDER_COLUMNS, make_sample_orders())
    written.append(path)

    for month in BUNDLED_MONTHS:
        path = landing / "events" / f"events_{YEAR}_{month:02d}.jsonl"
        write_jsonl(path, make_events(month))
        written.append(path)
    return written


def generate_month(landing: Path, month: int) -> Path:
    rows = None
    for m, rows in order_months(month, make_products()):
        pass
    assert m == month and rows is not None
    path = orders_file(landing, month)
    write_csv(path, ORDER_COLUMNS, rows)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Generate the sample project's landing files (deterministic).")
    parser.add_argument("--month", type=int, metavar="N",
                        help=f"write only orders_{YEAR}_NN.csv for month N "
                             f"({max(BUNDLED_MONTHS) + 1}..{MAX_MONTH}): new orders plus updates of earlier ones")
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent,
                        help="project folder holding ratui.yaml (default: this script's folder)")
    args = parser.parse_args(argv)
    landing = args.root / "ecommerce" / "landing"

    if args.month is None:
        for path in generate_bundled(landing):
            print(path)
        return 0
    if not max(BUNDLED_MONTHS) < args.month <= MAX_MONTH:
        parser.error(f"--month must be between {max(BUNDLED_MONTHS) + 1} and {MAX_MONTH} "
                     f"(months {BUNDLED_MONTHS[0]}..{BUNDLED_MONTHS[-1]} are bundled)")
    print(generate_month(landing, args.month))
    return 0


if __name__ == "__main__":
    sys.exit(main())
