"""Newznab categories of posts: from what a post's name says (edge.digest.names), with its
group as a hint, or from the group's name alone.

A group names the category of its posts by its words: the first rule whose words appear in the
group's name (split at dots and dashes) gives the category; a group no rule names is Other >
Misc (category_of(group)). A parsed name gives a subcategory by kind and quality (the table in
docs/names.md; category_of(parsed, group)); the group decides only where the name says nothing
(an obfuscated post in an e-book group is a book; a movie in a TV group stays a movie). The ids
are the newznab standard ones (docs/api.md lists them), so clients' category filters work
unchanged.
"""

from __future__ import annotations

from functools import lru_cache

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, overload

if TYPE_CHECKING:  # names imports this module (kind_hint); a parsed name is only read here
    from edge.digest.names import ParsedName


@dataclass(frozen=True)
class Category:
    id: int
    name: str  # "Books > Ebook", as RSS shows it

    @property
    def parent(self) -> int:
        return self.id // 1000 * 1000


PARENTS = {
    1000: "Console",
    2000: "Movies",
    3000: "Audio",
    4000: "PC",
    5000: "TV",
    6000: "XXX",
    7000: "Books",
    8000: "Other",
}
SUBCATEGORIES = {
    1010: "NDS",
    1080: "PS3",
    1020: "PSP",
    1030: "Wii",
    1040: "Xbox",
    1050: "Xbox 360",
    1090: "Other",
    1110: "3DS",
    1120: "PS Vita",
    1130: "WiiU",
    1140: "Xbox One",
    1180: "PS4",
    2010: "Foreign",
    2030: "SD",
    2040: "HD",
    2045: "UHD",
    2050: "BluRay",
    2060: "3D",
    2070: "DVD",
    2999: "Other",
    3010: "MP3",
    3020: "Video",
    3030: "Audiobook",
    3040: "Lossless",
    3999: "Other",
    4010: "0day",
    4020: "ISO",
    4030: "Mac",
    4040: "Mobile-Other",
    4050: "Games",
    4060: "Mobile-iOS",
    4070: "Mobile-Android",
    4999: "Other",
    5010: "WEB-DL",
    5020: "Foreign",
    5030: "SD",
    5040: "HD",
    5045: "UHD",
    5060: "Sport",
    5070: "Anime",
    5080: "Documentary",
    5999: "Other",
    6010: "DVD",
    6020: "WMV",
    6030: "XviD",
    6040: "x264",
    6045: "UHD",
    6060: "ImageSet",
    6999: "Other",
    7010: "Mags",
    7020: "Ebook",
    7030: "Comics",
    7040: "Technical",
    7999: "Other",
    8010: "Misc",
    8020: "Hashed",
}

# (words any of which names the category, the category id), tried in order.
RULES: tuple[tuple[frozenset[str], int], ...] = (
    (frozenset({"erotica", "xxx", "porn"}), 6000),
    (frozenset({"ebook", "e-book", "ebooks", "e-books", "books"}), 7020),
    (frozenset({"comics", "comic"}), 7030),
    (frozenset({"mags", "magazines"}), 7010),
    (frozenset({"audiobooks", "audiobook"}), 3030),
    (frozenset({"mp3", "sounds", "music", "audio", "flac", "lossless"}), 3000),
    (
        frozenset(
            {
                "playstation",
                "playstation2",
                "playstation3",
                "ps2",
                "ps3",
                "psp",
                "xbox",
                "xbox360",
                "wii",
                "nintendo",
                "nintendods",
                "console",
                "games",
            }
        ),
        1000,
    ),
    (frozenset({"teevee", "tv", "tvseries", "hdtv", "series", "sitcoms"}), 5000),
    (frozenset({"anime"}), 5070),
    (frozenset({"moovee", "movies", "movie", "dvdr", "bluray", "x264", "hdmovies", "dvd"}), 2000),
    (frozenset({"warez", "apps", "pc", "mac", "cd.image", "iso", "0day"}), 4000),
    (frozenset({"multimedia", "mpeg", "video", "highres"}), 2000),
)
OTHER = 8010
HASHED = 8020
_WORDS = re.compile(r"[.\-_]+")


@overload
def category_of(what: str) -> Category: ...


@overload
def category_of(what: ParsedName, group: str | None = None) -> Category: ...


def category_of(what: str | ParsedName, group: str | None = None) -> Category:
    """The category of a post: category_of(group) from its group's name alone, or
    category_of(parsed, group) from its parsed name with the group as a hint (the module's doc)."""
    if isinstance(what, str):
        return category_named(_group_category(what))
    return category_named(_name_category(what, group))


def kind_hint(group: str) -> str | None:
    """What a group's posts are, as a parsed name's kind (None for a group of anything): the
    hint edge.digest.names takes where a name does not tell."""
    category = _group_category(group)
    if category == 3030:
        return "book"
    return _KIND_OF_PARENT.get(category // 1000 * 1000)


_KIND_OF_PARENT = {1000: "game", 2000: "movie", 3000: "music", 4000: "software", 5000: "tv", 6000: "xxx", 7000: "book"}


@lru_cache(maxsize=4096)
def _group_category(group: str) -> int:
    # Cached: a group's name is read again for every post of it that a join names (kind_hint).
    parts = group.lower().split(".")
    # "e-book" as written, "e" and "book" split, and "cd.image" across a dot.
    words = set(parts) | set(_WORDS.split(group.lower())) | {f"{a}.{b}" for a, b in zip(parts, parts[1:])}
    for names, category in RULES:
        if words & names:
            return category
    return OTHER


def category_named(category: int) -> Category:
    named = _NAMED.get(category)
    if named is None:
        parent = category // 1000 * 1000
        if category == parent:
            named = Category(category, PARENTS[parent])
        else:
            named = Category(category, f"{PARENTS[parent]} > {SUBCATEGORIES[category]}")
        _NAMED[category] = named
    return named


_NAMED: dict[int, Category] = {}  # the categories made so far, by id (frozen: one of each will do)


def matches(category: Category, wanted: set[int]) -> bool:
    """Whether a post of this category answers a search for these category ids (a parent id
    takes its subcategories, as newznab clients expect)."""
    return category.id in wanted or category.parent in wanted


# A game's console by its platform (edge.digest.names); PC, Mac and Linux games are PC > Games.
_CONSOLES = {
    "nds": 1010,
    "psp": 1020,
    "wii": 1030,
    "xbox": 1040,
    "xbox360": 1050,
    "ps3": 1080,
    "3ds": 1110,
    "vita": 1120,
    "wiiu": 1130,
    "xboxone": 1140,
    "ps4": 1180,
    "switch": 1090,
    "ps2": 1090,
    "ps5": 1090,
    "gamecube": 1090,
    "gba": 1090,
    "xboxseries": 1090,
}
_SOFTWARE = {"mac": 4030, "ios": 4060, "android": 4070, "mobile": 4040}
# Languages that leave a release usable where English is wanted (not Foreign).
_NOT_FOREIGN = frozenset({"english", "multi", "dual", "original"})


def _name_category(parsed: ParsedName, group: str | None) -> int:
    """The subcategory a parsed name gives (docs/names.md, the table), the group's category
    where the name says nothing."""
    kind = parsed.kind
    tags = parsed.tags
    resolution = parsed.resolution
    if kind == "tv":
        if "anime" in tags:
            return 5070
        if "sport" in tags:
            return 5060
        if "documentary" in tags:
            return 5080
        if _foreign(parsed):
            return 5020
        if resolution == "2160p":
            return 5045
        if parsed.source == "web":
            return 5010
        return 5040 if resolution in ("720p", "1080p") else 5030
    if kind == "movie":
        if "3d" in tags:
            return 2060
        if _foreign(parsed):
            return 2010
        if parsed.source == "bluray" and ("disc" in tags or "complete" in tags):
            return 2050
        if parsed.source == "dvd" and "disc" in tags:
            return 2070
        if resolution == "2160p":
            return 2045
        return 2040 if resolution in ("720p", "1080p") else 2030
    if kind == "music":
        if "video" in tags:
            return 3020
        return 3040 if "lossless" in tags else 3010
    if kind == "book":
        if "audiobook" in tags:
            return 3030
        if "comic" in tags:
            return 7030
        if "magazine" in tags:
            return 7010
        return 7040 if "bookware" in tags else 7020
    if kind == "game":
        return _CONSOLES.get(parsed.platform or "", 4050)
    if kind == "software":
        return _SOFTWARE.get(parsed.platform or "", 4010)
    if kind == "xxx":
        if "imageset" in tags:
            return 6060
        if resolution == "2160p":
            return 6045
        if parsed.source == "dvd":
            return 6010
        if parsed.codec == "xvid":
            return 6030
        return 6040 if resolution in ("720p", "1080p") or parsed.codec in ("h264", "h265") else 6999
    by_group = _group_category(group) if group else OTHER
    if by_group != OTHER:
        return by_group
    return HASHED if parsed.hashed else OTHER


def _foreign(parsed: ParsedName) -> bool:
    """Whether the name states its audio's languages and English (or several) is not among them."""
    return bool(parsed.languages) and not _NOT_FOREIGN.intersection(parsed.languages)
