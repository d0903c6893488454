"""Newznab categories of posts, from their group's name (the catalog reads no article bodies, so
the group is what says what a post is).

The table: the first rule whose words appear in the group's name (split at dots and dashes)
gives the category; a group no rule names is Other > Misc. The ids are the newznab standard ones
(docs/api.md lists them), so clients' category filters work unchanged.
"""
from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Category:
    id: int
    name: str  # "Books > Ebook", as RSS shows it

    @property
    def parent(self) -> int:
        return self.id // 1000 * 1000


PARENTS = {1000: "Console", 2000: "Movies", 3000: "Audio", 4000: "PC", 5000: "TV", 6000: "XXX", 7000: "Books",
           8000: "Other"}
SUBCATEGORIES = {
    1010: "NDS", 1080: "PS3", 1020: "PSP", 1030: "Wii", 1040: "Xbox", 1050: "Xbox 360", 1090: "Other",
    2010: "Foreign", 2030: "SD", 2040: "HD", 2045: "UHD", 2050: "BluRay", 2060: "3D", 2070: "DVD", 2999: "Other",
    3010: "MP3", 3020: "Video", 3030: "Audiobook", 3040: "Lossless", 3999: "Other",
    4010: "0day", 4020: "ISO", 4030: "Mac", 4040: "Mobile-Other", 4050: "Games", 4999: "Other",
    5020: "Foreign", 5030: "SD", 5040: "HD", 5045: "UHD", 5060: "Sport", 5070: "Anime", 5080: "Documentary",
    5999: "Other",
    6010: "DVD", 6020: "WMV", 6040: "x264", 6999: "Other",
    7010: "Mags", 7020: "Ebook", 7030: "Comics", 7999: "Other",
    8010: "Misc",
}

# (words any of which names the category, the category id), tried in order.
RULES: tuple[tuple[frozenset[str], int], ...] = (
    (frozenset({"erotica", "xxx", "porn"}), 6000),
    (frozenset({"ebook", "e-book", "ebooks", "e-books", "books"}), 7020),
    (frozenset({"comics", "comic"}), 7030),
    (frozenset({"mags", "magazines"}), 7010),
    (frozenset({"audiobooks", "audiobook"}), 3030),
    (frozenset({"mp3", "sounds", "music", "audio", "flac", "lossless"}), 3000),
    (frozenset({"playstation", "playstation2", "playstation3", "ps2", "ps3", "psp", "xbox", "xbox360", "wii",
                "nintendo", "nintendods", "console", "games"}), 1000),
    (frozenset({"teevee", "tv", "tvseries", "hdtv", "series", "sitcoms"}), 5000),
    (frozenset({"anime"}), 5070),
    (frozenset({"moovee", "movies", "movie", "dvdr", "bluray", "x264", "hdmovies", "dvd"}), 2000),
    (frozenset({"warez", "apps", "pc", "mac", "cd.image", "iso", "0day"}), 4000),
    (frozenset({"multimedia", "mpeg", "video", "highres"}), 2000),
)
OTHER = 8010
_WORDS = re.compile(r"[.\-_]+")


def category_of(group: str) -> Category:
    """The category of the posts of a group (see the module's doc)."""
    parts = group.lower().split(".")
    # "e-book" as written, "e" and "book" split, and "cd.image" across a dot.
    words = set(parts) | set(_WORDS.split(group.lower())) | {f"{a}.{b}" for a, b in zip(parts, parts[1:])}
    for names, category in RULES:
        if words & names:
            return category_named(category)
    return category_named(OTHER)


def category_named(category: int) -> Category:
    parent = category // 1000 * 1000
    if category == parent:
        return Category(category, PARENTS[parent])
    return Category(category, f"{PARENTS[parent]} > {SUBCATEGORIES[category]}")


def matches(category: Category, wanted: set[int]) -> bool:
    """Whether a post of this category answers a search for these category ids (a parent id
    takes its subcategories, as newznab clients expect)."""
    return category.id in wanted or category.parent in wanted
