"""A hostile NNTP server for tests: the scripted server (simnews.scripted) with replies that a
broken or malicious Usenet server sends, to show that a client stays bounded in memory and time.

One behaviour a server, picked by name:

- ``endless``: an OVER reply that never ends (the range's lines, over and over, never the ``.``).
- ``stall``: an OVER reply that stops in the middle of a line and then says nothing.
- ``long_line``: an OVER reply whose first line never ends (no line feed comes, ever).
- ``out_of_range``: an OVER reply whose lines are numbered past the range asked for.
- ``login_required``: 480 to GROUP and OVER (after the greeting and LIST OVERVIEW.FMT), as a
  server whose subscription lapsed.
- ``unavailable``: 503 to every OVER.
- ``no_starttls``: 580 to STARTTLS.

    with HostileServer("endless", {"alt.binaries.test": (first, last)}) as server:
        ...  # NNTP_HOST=server.host NNTP_PORT=server.port NNTP_SSL=0
"""

from __future__ import annotations

import itertools

from simnews.scripted import ScriptedServer, _dot_stuffed, _Session

BEHAVIOURS = ("endless", "stall", "long_line", "out_of_range", "login_required", "unavailable", "no_starttls")
LINES_PER_SEND = 1000


def plain_line(number: int, group: str) -> bytes:
    """A well-formed INN overview line for article `number` of `group`."""
    return (
        b'%d\t[1/1] - "file%d.rar" yEnc (1/1)\tposter <p@example.net>\tSat, 01 Nov 2025 07:27:27 +0000'
        b"\t<%d@hostile.invalid>\t\t4000\t30\tXref: hostile.invalid %s:%d"
        % (number, number, number, group.encode(), number)
    )


class HostileServer(ScriptedServer):
    """groups: {name: (first, last)}, every number in between an article."""

    def __init__(self, behaviour: str, groups: dict[str, tuple[int, int]], **options):
        if behaviour not in BEHAVIOURS:
            raise ValueError(f"behaviour must be one of {', '.join(BEHAVIOURS)}")
        self.behaviour = behaviour
        self.spans = dict(groups)
        # Two lines a group, so that GROUP answers its true low and high water marks; OVER is
        # answered here, from the numbers, not from these lines.
        super().__init__(
            {name: [plain_line(first, name), plain_line(last, name)] for name, (first, last) in groups.items()},
            **options,
        )
        self.overs = 0  # OVER commands received

    def _answer(self, session: _Session, state: dict, command: str) -> bool:
        verb = command.split()[0].upper() if command.split() else ""
        if verb == "STARTTLS":
            session.reply(
                "580 can not initiate TLS negotiation"
                if self.behaviour == "no_starttls"
                else "502 STARTTLS not offered"
            )
            return True
        if verb in ("GROUP", "OVER", "XOVER") and self.behaviour == "login_required":
            session.reply("480 authentication required")
            return True
        return super()._answer(session, state, command)

    def _over(self, session: _Session, state: dict, args: list[str]) -> bool:
        self.overs += 1
        if self.behaviour == "unavailable":
            session.reply("503 overview database unavailable")
            return True
        try:
            first_text, _, last_text = args[0].partition("-")
            first, last = int(first_text), int(last_text or first_text)
        except (IndexError, ValueError):
            session.reply("501 syntax error in range")
            return True
        name = next((n for n, group in self.groups.items() if group is state["group"]), None)
        if name is None:
            session.reply("412 no newsgroup selected")
            return True
        session.reply("224 overview information follows")
        if self.behaviour == "endless":
            numbers = itertools.cycle(range(first, last + 1))
            while not self._stopping.is_set():
                session.send(_dot_stuffed([plain_line(next(numbers), name) for _ in range(LINES_PER_SEND)]))
            return False
        if self.behaviour == "stall":
            session.send(_dot_stuffed([plain_line(first, name)]) + plain_line(first + 1, name)[:20])
            self._stopping.wait()
            return False
        if self.behaviour == "long_line":
            session.send(b"%d\t" % first)
            while not self._stopping.is_set():
                session.send(b"x" * 65536)
            return False
        # out_of_range: the right count of lines, numbered a million past the range.
        count = min(last - first + 1, LINES_PER_SEND)
        session.send(_dot_stuffed([plain_line(last + 10**6 + i, name) for i in range(count)]) + b".\r\n")
        return True
