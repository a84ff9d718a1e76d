"""The Spark side: the file writer, scans and bucketed reads, schema conforming, session settings, plan text.
Imports `lake.format`, `lake.spec` and the floor; never `lake.commit`."""
