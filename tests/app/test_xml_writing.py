"""What the newznab feed and the NZB export write by hand rather than through ElementTree: escaped
text and attributes, and RFC 822 dates. Checked against a parser and the standard library."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from email.utils import format_datetime
from xml.etree import ElementTree as ET
from zoneinfo import ZoneInfo

from hypothesis import given, settings
from hypothesis import strategies as st

from app.api.newznab import _rfc822
from app.services.nzbexport import xml_attribute, xml_clean, xml_text

# Text with what XML escapes, what it forbids and what a parser normalises, among plain letters.
AWKWARD = st.text(
    alphabet=st.one_of(
        st.sampled_from(list("&<>\"'\t\n\r\x00\x01\x0b\x1f\ufffe\uffff\ud800é字 ;#x")),
        st.characters(codec="utf-8"),
    ),
    max_size=40,
)


@settings(max_examples=2000, deadline=None)
@given(AWKWARD)
def test_escaped_text_and_attributes_read_back_as_the_text_less_what_xml_forbids(value: str) -> None:
    document = f'<a b="{xml_attribute(value)}">{xml_text(value)}</a>'
    element = ET.fromstring(document.encode("utf-8", "surrogatepass"))
    assert element.get("b") == xml_clean(value)
    assert (element.text or "") == xml_clean(value)
    # Plain text comes back as the very same string (the quick path).
    plain = "".join(c for c in value if c.isalnum() or c in " .-_")
    assert xml_text(plain) is plain and xml_attribute(plain) is plain


@settings(max_examples=2000, deadline=None)
@given(
    st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30)),
    st.integers(min_value=-14 * 60, max_value=14 * 60),
    st.sampled_from([None, "Etc/UTC", "UTC", "Europe/Berlin", "America/New_York", "Asia/Kathmandu"]),
)
def test_rfc822_dates_are_the_standard_librarys(moment: datetime, minutes: int, zone: str | None) -> None:
    """In a fixed offset, or a named zone as PostgreSQL's moments come (psycopg: the session's zone)."""
    aware = moment.replace(tzinfo=timezone(timedelta(minutes=minutes)) if zone is None else ZoneInfo(zone))
    assert _rfc822(aware) == format_datetime(aware.astimezone(timezone.utc), usegmt=True)
    assert _rfc822(None) == "Thu, 01 Jan 1970 00:00:00 GMT"
