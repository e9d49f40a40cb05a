"""Running: invocations, change detection, one run's executor and its phases (build, gates), its inputs (sources),
the run record, runs in flight, recovery of dead runs, quality tests, the merge gate, queries."""
