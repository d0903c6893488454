"""Message-id hosts: a fragment keeps its message-id up to the last '@', the host after it is
stored once in message_hosts and named by its id."""

from __future__ import annotations

from array import array
from typing import NamedTuple

from sqlalchemy import text
from sqlalchemy.engine import Connection

from app.services.ingest.checks import Column
from edge.digest.compiled import load as load_compiled

# Built by setup.py where a C compiler is at hand (SEED_IMPL chooses); else the message-ids are cut in Python.
_msgcolumns = load_compiled("app.services._msgcolumns")


class MessageHosts(NamedTuple):
    """A batch's message-ids as the catalog stores them (migration 0007)."""

    locals: list[bytes]  # each fragment's message-id up to its host
    numbers: array[int]  # each fragment's host, as its index in names
    names: list[bytes]  # the hosts, in the order first seen


def split_message_ids(ids: Column) -> MessageHosts:
    """Message-ids (str, or UTF-8 bytes: checked text) cut before their last '@': the fragment
    keeps the local part, the host ('' for an id without an '@') is stored once, in
    message_hosts. In C where it is built (_msgcolumns.split_hosts)."""
    if ids and type(ids[0]) is not bytes:  # decoded text: a JSON body, a batch built here
        ids = [value.encode() for value in ids]
    if _msgcolumns is not None:
        return MessageHosts(*_msgcolumns.split_hosts(ids))
    hosts: dict[bytes, int] = {}
    locals_: list[bytes] = []
    numbers = array("i")
    for value in ids:
        at = value.rfind(b"@")
        host = value[at:] if at >= 0 else b""
        locals_.append(value[: len(value) - len(host)])
        numbers.append(hosts.setdefault(host, len(hosts)))
    return MessageHosts(locals_, numbers, list(hosts))


# Each host's id, added where new. A host another transaction adds meanwhile is skipped by ON
# CONFLICT and not seen by this statement's snapshot: asked again (message_host_ids).
HOST_IDS = (
    "WITH added AS (INSERT INTO message_hosts (host) SELECT h FROM unnest(CAST(:hosts AS text[])) AS h"
    " ORDER BY h ON CONFLICT (host) DO NOTHING RETURNING host, id)"
    " SELECT host, id FROM added UNION ALL"
    " SELECT host, id FROM message_hosts WHERE host = ANY(CAST(:hosts AS text[]))"
)


def message_host_ids(conn: Connection, names: list[bytes]) -> array[int]:
    """The message_hosts ids of these hosts (added where new), in their order: committed with the
    caller's short transaction (the group's partitions'), before either of the store's
    transactions needs them, so a new host never waits on another worker's store."""
    wanted = [name.decode() for name in names]
    found: dict[str, int] = {}
    for _ in range(5):
        missing = sorted(set(wanted).difference(found))
        if not missing:
            return array("i", map(found.__getitem__, wanted))
        found.update((host, id_) for host, id_ in conn.execute(text(HOST_IDS), {"hosts": missing}))
    raise RuntimeError(f"message hosts not found after adding them: {missing[:3]}")


def host_column(numbers: array[int], ids: array[int]) -> array[int]:
    """Each fragment's host id, from its host's number."""
    if _msgcolumns is not None:
        taken: array[int] = _msgcolumns.take(numbers, ids)
        return taken
    return array("i", map(ids.__getitem__, numbers))
