"""Newznab categories from group names (edge.digest.categories)."""

import pytest

from edge.digest.categories import PARENTS, SUBCATEGORIES, category_of, category_named, matches


@pytest.mark.parametrize(
    "group, category",
    [
        ("alt.binaries.e-book.french", 7020),
        ("alt.binaries.ebook", 7020),
        ("alt.binaries.cd.image.playstation2.dvdiso", 1000),
        ("alt.binaries.cd.image", 4000),
        ("alt.binaries.teevee", 5000),
        ("alt.binaries.multimedia", 2000),
        ("alt.binaries.moovee", 2000),
        ("alt.binaries.sounds.mp3", 3000),
        ("alt.binaries.erotica.divx", 6000),
        ("alt.binaries.anime", 5070),
        ("alt.binaries.test", 8010),
        ("alt.binaries.misc", 8010),
    ],
)
def test_a_group_names_its_category(group, category):
    assert category_of(group).id == category


def test_categories_have_names_and_parents():
    assert category_named(7020).name == "Books > Ebook" and category_named(7020).parent == 7000
    assert category_named(5000).name == "TV"
    assert all(sub // 1000 * 1000 in PARENTS for sub in SUBCATEGORIES)


def test_a_parent_id_takes_its_subcategories():
    ebook = category_of("alt.binaries.e-book")
    assert matches(ebook, {7000}) and matches(ebook, {7020}) and not matches(ebook, {7010, 5000})
