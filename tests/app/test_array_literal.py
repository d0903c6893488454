"""app.db.array_literal: an array parameter written as its text literal reads back, through
PostgreSQL's own parser, as the values it was made of, whatever they hold."""

from __future__ import annotations

from datetime import date

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import text

from app.db import array_literal

# Text with what an array literal quotes or escapes ({, }, ", \, commas, spaces, NULL), among any
# character PostgreSQL stores (no NUL, no lone surrogate).
TEXTS = st.text(
    alphabet=st.one_of(
        st.sampled_from(list("{}\"\\, \t\nNULnul'é字")),
        st.characters(codec="utf-8", exclude_characters="\x00"),
    ),
    max_size=30,
)
BIGINTS = st.integers(min_value=-(2**63), max_value=2**63 - 1)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.one_of(st.none(), TEXTS), max_size=8), st.lists(st.one_of(st.none(), BIGINTS), max_size=8))
def test_texts_and_bigints_read_back_as_they_were(db_session, texts: list[str | None], numbers: list[int | None]):
    row = db_session.execute(
        text("SELECT CAST(:t AS text[]), CAST(:n AS bigint[])"),
        {"t": array_literal(texts), "n": array_literal(numbers)},
    ).one()
    assert list(row) == [texts, numbers]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.one_of(st.none(), st.dates(min_value=date(1, 1, 1))), max_size=8))
def test_dates_read_back_as_they_were(db_session, dates: list[date | None]):
    assert db_session.execute(text("SELECT CAST(:d AS date[])"), {"d": array_literal(dates)}).scalar_one() == dates


def test_a_generator_of_values_is_read_whole(db_session):
    literal = array_literal(key for key in (2**40, -1, 0))
    assert db_session.execute(text("SELECT CAST(:k AS bigint[])"), {"k": literal}).scalar_one() == [2**40, -1, 0]
