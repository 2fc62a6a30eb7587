"""A lineage's facts, kept on each of its catalog rows: the verdict names and the approvals of all its versions.

A lineage is one bundle path with one engine: the recorder rewrites the bundle with each run's verdicts, and the
catalog keeps every version it indexed.  ``--verdict regression`` must find the lineage whose earlier version
failed, so the names of every version's verdicts are kept in ``lineage_verdicts`` (one row per name) and on each
version's row (``bundles.lineage_verdicts``, with ``lineage_approvals``, the number of distinct approvals).
"""

from __future__ import annotations

import sqlite3

#: a lineage's verdict names, in name order, joined by commas (the ``lineage_verdicts`` column)
_NAMES = ("SELECT group_concat(verdict, ',') FROM (SELECT lv.verdict FROM lineage_verdicts lv "
          "WHERE lv.path = :path AND lv.engine_sha256 = :engine ORDER BY lv.verdict)")
#: a lineage's distinct approvals (test, golden, generation) over all its versions (``lineage_approvals``)
_APPROVALS = ("SELECT count(DISTINCT a.test || ' ' || ifnull(a.golden, '') || ' ' || ifnull(a.generation, '')) "
              "FROM bundles o CROSS JOIN approvals a ON a.bundle_sha256 = o.sha256 "
              "WHERE o.path = :path AND o.engine_sha256 = :engine")


def refresh_lineage(conn: sqlite3.Connection, path: str, engine_sha256: str) -> None:
    """Recompute the lineage (``path``, ``engine_sha256``)'s facts from all its versions: for a lineage a version
    left (a known bundle moved to another path)."""
    key = {"path": path, "engine": engine_sha256}
    conn.execute("DELETE FROM lineage_verdicts WHERE path = :path AND engine_sha256 = :engine", key)
    conn.execute("INSERT OR IGNORE INTO lineage_verdicts SELECT DISTINCT v.verdict, o.path, o.engine_sha256 "
                 "FROM bundles o CROSS JOIN verdicts v ON v.bundle_sha256 = o.sha256 "
                 "WHERE o.path = :path AND o.engine_sha256 = :engine", key)
    names, approvals = conn.execute(f"SELECT ({_NAMES}), ({_APPROVALS})", key).fetchone()
    _set_columns(conn, key, names, approvals)


def join_lineage(conn: sqlite3.Connection, sha256: str, path: str, engine_sha256: str) -> None:
    """Row ``sha256`` joined the lineage (``path``, ``engine_sha256``): a new version, or a known bundle moved there.

    A version only adds to a lineage: its verdict names are added to the lineage's, and the approvals are counted
    again only when the row has some.  When neither changes (a bundle rewritten night after night), only this row
    takes the lineage's columns, so the cost does not grow with the versions kept before it.
    """
    key = {"path": path, "engine": engine_sha256, "sha": sha256}
    conn.execute("INSERT OR IGNORE INTO lineage_verdicts SELECT DISTINCT verdict, :path, :engine "
                 "FROM verdicts WHERE bundle_sha256 = :sha", key)
    names, own_approvals = conn.execute(
        f"SELECT ({_NAMES}), EXISTS (SELECT 1 FROM approvals WHERE bundle_sha256 = :sha)", key).fetchone()
    other = conn.execute("SELECT lineage_verdicts, lineage_approvals FROM bundles WHERE path = :path "
                         "AND engine_sha256 = :engine AND sha256 != :sha LIMIT 1", key).fetchone()
    approvals = other[1] if other is not None and not own_approvals else conn.execute(_APPROVALS, key).fetchone()[0]
    if other is not None and (other[0], other[1]) == (names, approvals):  # every other version has these already
        conn.execute("UPDATE bundles SET lineage_verdicts = :names, lineage_approvals = :approvals "
                     "WHERE sha256 = :sha", {**key, "names": names, "approvals": approvals})
    else:
        _set_columns(conn, key, names, approvals)


def _set_columns(conn: sqlite3.Connection, key: dict[str, str], names: str | None, approvals: int) -> None:
    """Give every version of the lineage ``key`` these columns, writing only the rows that differ."""
    conn.execute("UPDATE bundles SET lineage_verdicts = :names, lineage_approvals = :approvals "
                 "WHERE path = :path AND engine_sha256 = :engine "
                 "AND (lineage_verdicts IS NOT :names OR lineage_approvals IS NOT :approvals)",
                 {**key, "names": names, "approvals": approvals})
