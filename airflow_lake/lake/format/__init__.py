"""The table format on disk: paths, storage, the log, instants, data files and their stats, the folded
state, checkpoints, snapshots, filters, and Spark's row hashes (bucket ids and fingerprints written without Spark).
Imports `lake.spec` and the floor (`errors`, `faults`)."""
