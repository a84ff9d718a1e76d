"""The commit protocol: transactions, the isolation check, recovery of dead writers, heartbeats, requests.
Imports `lake.format`, `lake.spec` and the floor."""
