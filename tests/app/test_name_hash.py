"""catalog.name_hash, what releases are joined into posts by: the name without case, spaces or
punctuation, hashed, the same for any spelling of it, and the same for ASCII names (read by a
quicker path) as by the folding every name gets."""

from __future__ import annotations

import re
import string
from hashlib import blake2b

from hypothesis import given, settings
from hypothesis import strategies as st

from app.services.ingest.catalog import name_hash


def folded_hash(name: str) -> int | None:
    """The definition: letters and digits only (any script), case folded, UTF-8, BLAKE2b of 8
    bytes as a signed integer; None under 8 bytes."""
    folded = re.sub(r"[\W_]+", "", name).casefold().encode()
    if len(folded) < 8:
        return None
    return int.from_bytes(blake2b(folded, digest_size=8).digest(), "big", signed=True)


def test_spellings_of_one_name_hash_alike_and_short_names_not_at_all():
    assert name_hash("The.Walking.Dead.S01E01") == name_hash("the walking dead s01e01") is not None
    assert name_hash("The_Walking-Dead [S01E01]") == name_hash("THE WALKING DEAD S01E01")
    assert name_hash("Ça.Déménage.Été") == name_hash("ça déménage été")
    assert name_hash("ab.cd.ef") is None  # 6 letters
    assert name_hash(b"The.Walking.Dead.S01E01") == name_hash("The.Walking.Dead.S01E01")


@settings(max_examples=3000)
@given(st.text(alphabet=string.printable, max_size=40))
def test_an_ascii_name_hashes_as_the_definition_says(name: str):
    assert name_hash(name) == folded_hash(name)


@settings(max_examples=1000)
@given(st.text(alphabet=st.one_of(st.sampled_from(list("._- Éçßİ字٣")), st.characters()), max_size=40))
def test_any_name_hashes_as_the_definition_says(name: str):
    assert name_hash(name) == folded_hash(name)
