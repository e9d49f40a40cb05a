"""The one place that knows how Spark is reached (session, job groups, cancellation, silencing); reading its errors."""
