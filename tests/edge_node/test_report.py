"""What the operator sees: one JSON object per event, or a live table with events above it."""

from __future__ import annotations

import io
import json

from edge.node.report import JsonLog, LiveDisplay


def test_one_json_object_per_event_and_line():
    out = io.StringIO()
    log = JsonLog(out)
    log.event("batch", range=3, first=2**40, lines=20000)
    log.event("error", message="pas de connexion")
    first, second = (json.loads(line) for line in out.getvalue().splitlines())
    assert first["event"] == "batch" and first["first"] == 2**40 and "time" in first
    assert second == {"time": second["time"], "event": "error", "message": "pas de connexion"}


def test_the_live_table_is_redrawn_in_place_with_events_above():
    out = io.StringIO()
    rows = ["range  group", "   17  alt.binaries.test"]
    display = LiveDisplay(out, lambda: rows)
    display.event("lease", range=17, group="alt.binaries.test")
    display.event("batch", range=17)  # shown in the table's figures, not as a line
    display.event("retry", range=17, reason="503")
    display.event("retry", call="lease", reason="connection refused")  # no range: shown
    display.close()
    text = out.getvalue()
    assert "lease    range=17 group=alt.binaries.test" in text
    assert "batch " not in text and "reason=503" not in text
    assert "call=lease reason=connection refused" in text
    assert text.count("\x1b[2F\x1b[J") >= 2  # the table's two lines erased before each redraw
    assert text.endswith("   17  alt.binaries.test\n")
