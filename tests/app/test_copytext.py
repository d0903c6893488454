"""COPY text payloads: escaping, NULLs, big integers."""
import psycopg

from app.services.copytext import copy_columns, copy_payload


def test_payload_escapes_and_nulls():
    payload = copy_payload([("int", [1, None, 2**63 - 1]), ("text", ["a\\b", "tab\there", None]),
                            ("text", ["plain", "new\nline\r", ""])])
    assert payload == (b"1\ta\\\\b\tplain\n"
                       b"\\N\ttab\\there\tnew\\nline\\r\n"
                       b"9223372036854775807\t\\N\t\n")
    assert copy_payload([("int", [])]) == b""


def test_payload_round_trips_through_postgres(engine):
    values = [(2**32 + 5, "<a\\b@x>", None), (-(2**63), "", "é ü \u2603"), (0, "t\tab", "x")]
    with engine.connect() as conn:
        raw = conn.connection.driver_connection
        with raw.cursor() as cur:
            cur.execute("CREATE TEMP TABLE t (n bigint, a text, b text)")
            copy_columns(cur, "COPY t FROM STDIN", [("int", [v[0] for v in values]), ("text", [v[1] for v in values]),
                                                    ("text", [v[2] for v in values])])
            cur.execute("SELECT n, a, b FROM t ORDER BY n")
            assert sorted(cur.fetchall()) == sorted(values)
        conn.rollback()
