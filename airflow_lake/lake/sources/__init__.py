"""What a job reads: files (read strictly) or a read-only Spark SQL query over lake tables.
Stands above the door: imports `lake.table` (opening other tables like any user) and every room below it."""
