# @merge_strategy: full_refresh
# @description: Customers, buyers, revenue and the share of high-value customers per country
# @tags: marketing

# A Python pipeline: run(ctx) returns a Spark DataFrame. By default it runs in a child process confined by the
# kernel (python.isolation: confined): it reaches data only through ctx, never files or the network.
from pyspark.sql import functions as F


def run(ctx):
    customers = ctx.ref("gold.customer_lifetime_value")
    per_country = customers.groupBy("country").agg(
        F.count("*").alias("customers"),
        F.sum(F.when(F.col("orders_kept") > 0, 1).otherwise(0)).alias("buyers"),
        F.sum("lifetime_value").cast("decimal(16,2)").alias("revenue"),
        F.sum(F.when(F.col("value_tier") == "high", 1).otherwise(0)).alias("high_value_customers"),
    )
    return per_country.withColumn(
        "high_value_share", F.round(F.col("high_value_customers") / F.col("customers"), 4)
    )
