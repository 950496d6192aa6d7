"""Reads a local Delta table with DuckDB's delta extension, offline.

    duckdb_delta.py TABLE_DIR [SQL]

The extension comes from the PyPI packages duckdb-extension-delta and
duckdb-extensions and is installed into a throw-away extension directory;
autoinstall and autoload are off, so nothing is fetched. The table is the
view `t`. Prints one JSON object: the row count, each column's name and
DuckDB type, and the rows of SQL when given (values that JSON lacks, such
as decimals and timestamps, as text).
"""

import json
import sys
import tempfile

import duckdb
import duckdb_extensions


def main(argv):
    table, sql = argv[1], (argv[2] if len(argv) > 2 else None)
    with tempfile.TemporaryDirectory() as extensions:
        con = duckdb.connect(
            config={
                "autoinstall_known_extensions": False,
                "autoload_known_extensions": False,
                "extension_directory": extensions,
            }
        )
        # A query slower than 2 s would print a progress bar on stdout,
        # before the JSON this script prints.
        con.sql("SET enable_progress_bar = false")
        duckdb_extensions.import_extension("delta", con=con)
        con.sql("LOAD delta")
        quoted = "'" + table.replace("'", "''") + "'"
        con.sql(f"CREATE VIEW t AS SELECT * FROM delta_scan({quoted})")
        columns = [{"name": n, "type": t} for n, t, *_ in con.sql("DESCRIBE t").fetchall()]
        count = con.sql("SELECT count(*) FROM t").fetchone()[0]
        rows = con.sql(sql).fetchall() if sql else []
        con.close()
    print(json.dumps({"rows": count, "columns": columns, "query": rows}, default=str))


if __name__ == "__main__":
    main(sys.argv)
