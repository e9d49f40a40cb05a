"""Where a project's bytes live beyond its own folder: S3-compatible object stores (s3.py), the warehouse that holds
the tables (warehouse.py), and Spark's connector for them (spark/s3a.py)."""
