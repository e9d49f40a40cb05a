"""Iceberg tables seen from Spark without Iceberg's runtime jar: schema mapping and reading at a ref."""
