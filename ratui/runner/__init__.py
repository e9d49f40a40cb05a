"""`ratui up`: the long-running runner of a project (schedules.md). runner.py is its loop, lease and fires;
health.py its /healthz; clock.py the time it decides by."""
