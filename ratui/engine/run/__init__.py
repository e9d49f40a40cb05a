"""Running: the Engine facade, invocations, a run's phases and inputs, landing reads, quality, recovery, queries."""
