"""The project as written: discovery, names, settings, pipeline config, templating, the DAG, the compile step."""
