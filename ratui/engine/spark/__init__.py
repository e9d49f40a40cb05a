"""The one place that knows how Spark is reached (session, job groups, cancellation, silencing); reading its errors."""

import warnings

# PySpark imports its testing helpers when it converts types and warns there, on stderr, when pandas 3 is
# installed ("PySpark does not yet fully support pandas >= 3.0.0"): nothing may reach the terminal the console
# draws on. ratui's extras pin pandas below 3; a user's own pandas 3 must not print either.
warnings.filterwarnings("ignore", message=r"PySpark does not yet fully support pandas", category=FutureWarning)
