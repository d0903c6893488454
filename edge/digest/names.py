"""Release names understood: what a post is (tv, movie, music, book, game, software, xxx, other)
and what its name says of it (title, year, season and episodes, air date, quality, languages,
release group; artist and album, author, platform), from the name alone. Pure and fast: no I/O,
no database, precompiled patterns, a cache of the words seen and a few passes over the name's
tokens. docs/names.md tells the conventions, the categories and the figures.

How a name is read. Scene and Usenet names follow a few rules: the title comes first, then
markers (a year, ``S02E09``, ``2x09``, a date, a resolution, a source, a codec, language and
edition tags), then ``-GROUP``. So the name is cut into tokens (words between separators; and
brackets and spaced dashes, which end a title too), each token is looked up in a vocabulary of
markers, and the title is the text before the first marker. Words that are markers in one name
and title words in another (``French``, ``Extended``, ``Web``, ``DC``) end the title only when a
technical marker follows them (``Fight.Club.French.1080p`` but ``The.French.Connection.1971``),
or when written as scene tags are (``LiMiTED``, ``PROPER``). Music, books, games and software are
told by their own tags first (``-WEB-2023-GROUP``, ``eBook``, ``NSW``, ``v1.2.3``) and have
layouts of their own (``Artist-Album-(CAT)-WEB-2023-GROUP``, ``Author.-.Title.German.eBook-GRP``).

parse() never raises on text: any string gives a ParsedName (kind "other" and nulls where
nothing is understood). Names longer than MAX_NAME characters are read up to it.
"""

from __future__ import annotations

import re
from datetime import date
from typing import Any, NamedTuple, TypeAlias

from edge.digest.categories import category_of, kind_hint

KINDS = ("tv", "movie", "music", "book", "game", "software", "xxx", "other")
# Folded sources: what newznab clients tell apart. CAM, telesync and screeners are sources too,
# but none of these four: their source is None and a tag says which (cam, telesync, screener).
SOURCES = ("hdtv", "web", "bluray", "dvd")
RESOLUTIONS = ("480p", "576p", "720p", "1080p", "2160p")
# Longer names are read up to this many characters (a release name is at most a few hundred).
MAX_NAME = 1024
# A four-digit number is a year up to next year (release names do not come from the future).
MAX_YEAR = date.today().year + 1


class ParsedName(NamedTuple):
    """What a release name says; None (or an empty tuple, or False) where it does not tell.

    episodes is () for a full season pack (``S02`` alone) and None when the name has no episode;
    absolute holds anime-style absolute numbers; air_date is ``YYYY-MM-DD`` (daily shows); source
    is one of SOURCES; resolution one of RESOLUTIONS. title is the show's or film's title, for
    music the album (artist apart), for books the book's title (author apart). format: music's
    (mp3, flac...) or a book's (ebook, comic, magazine, audiobook, bookware). platform: a game's
    console or a program's OS. tags: what else the name states that a category needs (anime,
    sport, documentary, 3d, disc: a full BluRay or DVD, complete, remux, cam, telesync, screener,
    imageset, lossless, video: a music video; and a book's format)."""

    kind: str
    title: str | None = None
    year: int | None = None
    season: int | None = None
    episodes: tuple[int, ...] | None = None
    absolute: tuple[int, ...] | None = None
    air_date: str | None = None
    resolution: str | None = None
    source: str | None = None
    codec: str | None = None
    languages: tuple[str, ...] = ()
    release_group: str | None = None
    proper: bool = False
    repack: bool = False
    artist: str | None = None
    album: str | None = None
    author: str | None = None
    format: str | None = None
    platform: str | None = None
    hashed: bool = False
    tags: tuple[str, ...] = ()


NOTHING = ParsedName(kind="other")
_new_parsed = tuple.__new__
# The order _Reader._video makes a ParsedName in.
assert ParsedName._fields == (
    "kind",
    "title",
    "year",
    "season",
    "episodes",
    "absolute",
    "air_date",
    "resolution",
    "source",
    "codec",
    "languages",
    "release_group",
    "proper",
    "repack",
    "artist",
    "album",
    "author",
    "format",
    "platform",
    "hashed",
    "tags",
)


def parse(name: str, group: str | None = None) -> ParsedName:
    """Parse one release name. group (the post's newsgroup) is a hint where the name does not
    tell (an obfuscated post in an e-book group is a book), never over what the name says."""
    text, extension = _cleaned(name)
    if not text:
        return NOTHING
    hint = kind_hint(group) if group else None
    if " " not in text and "." not in text and "_" not in text and _HASHED.fullmatch(text):
        return ParsedName(kind=hint or "other", hashed=True)
    return _Reader(text, extension, hint).read()


def parse_post(name: str, file_names: list[str] | tuple[str, ...] = (), group: str | None = None) -> ParsedName:
    """Parse a post by its name or, where that is a hash, by the first of its files' names that
    says more (obfuscated posts often keep a real name on a file)."""
    parsed = parse(name, group)
    if not parsed.hashed:
        return parsed
    for file_name in file_names:
        candidate = parse(file_name, group)
        if not candidate.hashed and candidate.title:
            return candidate
    return parsed


def record(name: str, group: str | None = None) -> dict[str, object]:
    """One name as `flask seed names parse --json` prints it: the name, every field of its
    ParsedName (tuples as lists) and its category (id and name)."""
    parsed = parse(name, group)
    category = category_of(parsed, group)
    fields: dict[str, object] = {"name": name}
    for field, value in parsed._asdict().items():
        fields[field] = list(value) if isinstance(value, tuple) else value
    fields["category"] = category.id
    fields["category_name"] = category.name
    return fields


# --- Cleaning -------------------------------------------------------------------------------

# Control and direction characters are spaces (a name is what a poster wrote).
_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2066-\u2069\ufeff]")
_SPACES = re.compile(r"\s{2,}")
_PATH_PART = re.compile(r"(?<! )[/\\](?! )")
_PATH_WORDS = re.compile(r"[^\W_]+")
# Extensions a name may end with, by the kind they tell ("": archives, parity, nfo: nothing).
# Numbered volumes (.r00, .001, .part01, .vol03+04) are cut as well.
_EXTENSIONS = {
    **dict.fromkeys("mkv avi mp4 m4v wmv mpg mpeg ts m2ts vob divx mov flv webm 3gp mk3d ogm rmvb".split(), "video"),
    **dict.fromkeys("mp3 flac m4a ogg opus wav ape wma".split(), "music"),
    **dict.fromkeys("epub pdf mobi azw3 azw lit djvu cbr cbz fb2 m4b".split(), "book"),
    **dict.fromkeys("rar 7z zip par2 par nfo sfv nzb srr srs md5 sha1 txt diz iso img bin nrg mdf mds".split(), ""),
    **dict.fromkeys("srt sub idx ass ssa jpg jpeg png".split(), ""),
}
_NUMBERED_FIRST = frozenset("rzpv0123456789")
_NUMBERED = re.compile(r"r\d{2,3}|z\d{2}|\d{3}|part\d{1,4}|vol\d{1,4}[+-]\d{1,4}", re.IGNORECASE)
# Obfuscated names: a long run of letters and digits with both in it, hex, or a UUID.
_HASHED = re.compile(
    r"(?=[A-Za-z]*\d)(?=\d*[A-Za-z])[A-Za-z0-9]{20,}|[0-9a-fA-F]{16,}"
    r"|[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}"
)


def _cleaned(name: str) -> tuple[str, str]:
    """The name without controls, extension or a bracket around all of it; and the kind its
    extension tells ("video", "music", "book", or "")."""
    text = name[:MAX_NAME]
    if not text.isprintable() and _CONTROLS.search(text):
        text = _CONTROLS.sub(" ", text)
    if "  " in text:
        text = _SPACES.sub(" ", text)
    text = text.strip()
    extension = ""
    for _ in range(3):
        head, dot, suffix = text.rpartition(".")
        if not dot or not head or len(suffix) > 12:
            break
        lowered = suffix.lower()
        found = _EXTENSIONS.get(lowered)
        if found is None and (lowered[:1] not in _NUMBERED_FIRST or not _NUMBERED.fullmatch(lowered)):
            break
        extension = extension or found or ""
        text = head.rstrip(" .")
    if "/" in text or "\\" in text:
        # A path (Show/Season 2/Show.2x05.mkv): its last part names the release, or its folder
        # where the file's own name is a short one (Movie.2010.DVDRip.XviD-GRP/grp-mvie.avi).
        # Not AC/DC: a folder's name is longer than two letters.
        parts = [part.strip() for part in _PATH_PART.split(text) if part.strip()]
        if len(parts) > 1 and len(parts[-2]) > 2:
            text = parts[-1]
            if len(_PATH_WORDS.findall(text)) < 3:
                text = parts[-2]
    # "[ Show S02E10 1080p WEB-DL x264-GRP ]": the whole name in brackets.
    if len(text) > 2 and text[0] == "[" and text[-1] == "]" and "[" not in text[1:-1] and "]" not in text[1:-1]:
        text = text[1:-1].strip(" .")
    return text, extension


# --- The vocabulary ---------------------------------------------------------------------------

# Token classes.
WORD = 0  # not in the vocabulary: a title word
TECH = 1  # always a marker: 720p, x264, BluRay, HDTV, READNFO...
FLAG = 2  # an English word that is a tag too: a marker written as scene tags are (LiMiTED), or when
#               a technical marker follows (Unrated.Director.Cut.1080p); never before a year alone
LANG = 3  # a language: a marker as FLAG, and before a year too (Noah.German.2014)
UPPER = 4  # a marker only in capitals and when a marker follows (DC, SE, US, UK, HD, TS)
WEAK = 5  # a marker in capitals or when a technical marker follows (Web)
YEAR = 6
EPISODE = 7  # S01E02, 2x03, E05, EP01, Saison5
DATE = 8  # the first token of a date (its value the date); DATEPART the others
DATEPART = 9
NUMBER = 10  # digits only, not a year
SEASON = 11  # a season word (Season, Saison, Stagione): a marker before its number
EPWORD = 12  # an episode word (Episode, Ep, Eps): a marker before its number and a tag or the end
OPEN = 13  # an opening bracket: ends a title
CLOSE = 14
DASH = 15  # a dash between parts (" - ", ".-."): ends a title
GROUP = 16  # the release group and reposters' tags after it: never a marker

# What a vocabulary token gives.
F_NONE, F_RES, F_SRC, F_CODEC, F_AUDIO, F_LANG, F_SUBS, F_FLAG = range(8)

_VOCAB: dict[str, tuple[int, int, str]] = {}


def _words(cls: int, field: int, value: str | None, words: str) -> None:
    for word in words.split():
        _VOCAB[word.lower()] = (cls, field, word.lower() if value is None else value)


# Resolutions: the height ("w": a weak one, taken when nothing else says).
for _height in ("240", "360", "480", "540", "576", "720", "1080", "1440", "2160", "4320"):
    _words(TECH, F_RES, _height, f"{_height}p {_height}i")
_words(TECH, F_RES, "2160w", "4k uhd 4kuhd uhdtv ultrahd")
# Sources, folded; "" for those that are none of the four; "web?" for streaming services (web
# when nothing else says).
_words(TECH, F_SRC, "bluray", "bluray bdrip brrip bdremux bd25 bd50 bd bdmv bdiso uhdbd bd5 bd9 bdr blurayrip")
_words(TECH, F_SRC, "bluray", "hdbd bluray3d brip bdscr blueray")
_words(TECH, F_SRC, "dvd", "dvdrip dvdr dvd dvd5 dvd9 dvdscr dvdscreener dvdiso dvdmux svcd dvdivx dvdxvid")
_words(TECH, F_SRC, "hdtv", "hdtv pdtv sdtv dsrip dsr tvrip hdtvrip satrip dvbrip dtvrip")
_words(TECH, F_SRC, "web", "webdl webrip webcap webhd webuhd webmux webdlrip dlrip webhdrip")
_words(TECH, F_SRC, "", "cam camrip hdcam hdts telesync tc telecine hdtc workprint r5 ppv vhsrip vhs")
_words(TECH, F_SRC, "", "hdrip dmrip screener scr hddvd hddvdrip vcd")
_words(WEAK, F_SRC, "web", "web")
_words(TECH, F_SRC, "web?", "amzn hulu dsnp atvp hmax pcok crav netflix amazonhd netflixuhd itunes")
_words(UPPER, F_SRC, "web?", "NF DCU")
# Codecs.
_words(TECH, F_CODEC, "h264", "x264 h264 avc x264hd avchd")
_words(TECH, F_CODEC, "h265", "x265 h265 hevc hevc10 hevc10bit")
_words(TECH, F_CODEC, "xvid", "xvid")
_words(TECH, F_CODEC, "divx", "divx divx5")
_words(TECH, F_CODEC, "vc1", "vc1")
_words(TECH, F_CODEC, "mpeg2", "mpeg2 mpg2 h262")
_words(TECH, F_CODEC, "vp9", "vp9")
_words(TECH, F_CODEC, "", "vp7 h263 av1 wmv dxva")
# Audio.
_words(TECH, F_AUDIO, None, "ac3 ac3d ac3md aac aac2 aac5 dts dtshd dtsma dtses dtsx truehd atmos flac flac1 flac2")
_words(TECH, F_AUDIO, None, "mp3 lame dd5 dd2 dd7 ddp ddp5 ddp2 ddp7 eac3 eac3d opus lpcm pcm 6ch 8ch 2ch ddex")
_words(TECH, F_AUDIO, None, "dolby 2audio 448kbps 384kbps 640kbps")
_words(UPPER, F_AUDIO, None, "DD")
_words(FLAG, F_AUDIO, None, "mic line")
# Languages of the audio ("multi", "dual": several, English among them as a rule; "original").
_LANGUAGES = {
    "english": "english eng",
    "french": "french fre vff vfq vf vf2 vfi",
    "german": "german ger deutsch",
    "italian": "italian ita",
    "spanish": "spanish esp castellano latino",
    "portuguese": "portuguese",
    "brazilian": "brazilian",
    "dutch": "dutch flemish",
    "danish": "danish",
    "swedish": "swedish swe",
    "norwegian": "norwegian",
    "finnish": "finnish",
    "nordic": "nordic",
    "polish": "polish pol",
    "russian": "russian rus",
    "ukrainian": "ukrainian ukr",
    "czech": "czech cze",
    "hungarian": "hungarian hun",
    "turkish": "turkish",
    "greek": "greek",
    "hebrew": "hebrew heb",
    "arabic": "arabic",
    "hindi": "hindi",
    "tamil": "tamil",
    "telugu": "telugu",
    "malayalam": "malayalam",
    "japanese": "japanese jap jpn",
    "korean": "korean",
    "chinese": "chinese mandarin cantonese",
    "thai": "thai",
    "vietnamese": "vietnamese",
    "icelandic": "icelandic",
    "romanian": "romanian",
    "bulgarian": "bulgarian",
    "croatian": "croatian",
    "serbian": "serbian",
    "slovak": "slovak",
    "estonian": "estonian",
    "latvian": "latvian",
    "lithuanian": "lithuanian",
    "catalan": "catalan",
    "persian": "persian farsi",
    "multi": "multi multilang multilanguage",
    "dual": "dual",
}
for _language, _names in _LANGUAGES.items():
    _words(LANG, F_LANG, _language, _names)
_words(TECH, F_LANG, "french", "truefrench")
_words(TECH, F_LANG, "german", "swissgerman")
for _code, _language in (
    ("EN", "english"),
    ("FR", "french"),
    ("DE", "german"),
    ("NL", "dutch"),
    ("PL", "polish"),
    ("RU", "russian"),
    ("ES", "spanish"),
    ("DK", "danish"),
    ("DL", "dual"),
    ("VO", "original"),
    ("VOA", "original"),
    ("IT", "italian"),
):
    _words(UPPER, F_LANG, _language, _code)
# Subtitles: they leave the audio's language as it is.
_words(TECH, F_SUBS, None, "vostfr vost subfrench stfr nlsubs nlsub multisubs multisub swesub dksubs hebsubs")
_words(TECH, F_SUBS, None, "esub esubs subforced fastsub hardsub hardsubs subpack engsub engsubs")
_words(FLAG, F_SUBS, None, "sub subs subbed fansub subtitles")
# Edition, release and technical flags.
_words(TECH, F_FLAG, "repack", "repack rerip")
_words(FLAG, F_FLAG, "proper", "proper real")
_words(TECH, F_FLAG, "", "readnfo nfofix dirfix samplefix prooffix subfix syncfix audiofix nfo stv docu doku preair")
_words(TECH, F_FLAG, "", "remux hfr hdr hdr10 hdr10plus dovi 10bit 8bit 12bit hsbs hou 48fps 60fps 2in1 3in1")
_words(TECH, F_FLAG, "", "directorscut dircut")
_words(FLAG, F_FLAG, "", "internal limited extended unrated uncut remastered theatrical festival colorized")
_words(FLAG, F_FLAG, "", "upscaled upscale imax hybrid retail final complete special edition collectors")
_words(FLAG, F_FLAG, "", "collector's ultimate director directors director's cut alternate alternative version")
_words(FLAG, F_FLAG, "", "integral restored uncensored dubbed read sample proof doc sbs criterion")
_words(FLAG, F_FLAG, "", "anime documentary")
_words(UPPER, F_FLAG, "", "DC SE HD SD LD MD WS FS HR HQ HC OAR PAL NTSC SECAM US UK AU NZ TS DV CEE EE 3D")
# Two tokens read as one (Blu-Ray, WEB-DL, H.264): the pair, by its words; one separator between.
_PAIRS = {
    ("blu", "ray"): "bluray",
    ("blu", "ray3d"): "bluray3d",
    ("web", "dl"): "webdl",
    ("web", "rip"): "webrip",
    ("web", "dlrip"): "webdlrip",
    ("web", "cap"): "webcap",
    ("web", "hd"): "webhd",
    ("h", "264"): "h264",
    ("h", "265"): "h265",
    ("x", "264"): "x264",
    ("x", "265"): "x265",
    ("dts", "hd"): "dtshd",
    ("dts", "es"): "dtses",
    ("dts", "x"): "dtsx",
    ("dd", "ex"): "ddex",
    ("vc", "1"): "vc1",
    ("dvd", "r"): "dvdr",
    ("dvd", "rip"): "dvdrip",
    ("hd", "dvd"): "hddvd",
    ("read", "nfo"): "readnfo",
    ("hd", "tv"): "hdtv",
    ("tv", "rip"): "tvrip",
    ("bd", "rip"): "bdrip",
    ("br", "rip"): "brrip",
    ("vhs", "rip"): "vhsrip",
    ("hdr", "10"): "hdr10",
    ("mpeg", "2"): "mpeg2",
    ("dolby", "vision"): "dovi",
    ("pre", "air"): "preair",
    ("dvd", "scr"): "dvdscr",
    ("director", "cut"): "directorscut",
    ("directors", "cut"): "directorscut",
    ("director's", "cut"): "directorscut",
    ("hd", "rip"): "hdrip",
    ("ac3", "d"): "ac3d",
    ("5", "1"): "",
}
_PAIR_SECONDS = frozenset(second for _, second in _PAIRS)

# Other kinds' tokens.
_BOOK_TAGS = frozenset(
    "ebook ebooks epub mobi azw3 azw pdf cbr cbz magazine magazines abook audiobook "
    "audiobooks hoerbuch hörbuch bookware".split()
)
_AUDIOBOOK_TAGS = frozenset("abook audiobook audiobooks hoerbuch hörbuch".split())
_GAME_PLATFORMS = {
    "nsw": "switch",
    "ps2": "ps2",
    "ps3": "ps3",
    "ps4": "ps4",
    "ps5": "ps5",
    "psp": "psp",
    "psv": "vita",
    "psvita": "vita",
    "wii": "wii",
    "wiiu": "wiiu",
    "ngc": "gamecube",
    "nds": "nds",
    "3ds": "3ds",
    "gba": "gba",
    "xbox": "xbox",
    "x360": "xbox360",
    "xbox360": "xbox360",
    "xboxone": "xboxone",
    "xbone": "xboxone",
}
_OS_TAGS = {
    "winall": "windows",
    "win32": "windows",
    "win64": "windows",
    "winnt": "windows",
    "winnt2k": "windows",
    "win2k": "windows",
    "winxp": "windows",
    "windows": "windows",
    "macos": "mac",
    "macosx": "mac",
    "osx": "mac",
    "linux": "linux",
    "android": "android",
    "ios": "ios",
    "iphone": "ios",
    "ipad": "ios",
    "symbian": "mobile",
    "symbianos": "mobile",
    "ngage": "mobile",
    "s60": "mobile",
    "pocketpc": "mobile",
    "wm5": "mobile",
    "x64": "windows",
    "x86": "windows",
}
# The groups that release PC games (their releases' names often tell nothing else: Game.Name-CODEX).
_GAME_GROUPS = frozenset(
    "codex plaza skidrow reloaded flt fairlight cpy hoodlum tinyiso razor1911 prophet empress "
    "rune tenoke doge simplex darksiders goldberg elamigos gog".split()
)
# Tags of programs; a version beside one of them makes a program of a name (or a game: Update.v1.03).
_SOFTWARE_TAGS = frozenset(
    "keygen keymaker keygenerator incl crack cracked patch patched regged serial retail "
    "multilingual portable unattended activator win mac x64 x86".split()
)
# Tags that make a program (or a Mac or Linux game) of a name without a version.
_SOFTWARE_ALONE = frozenset(
    "keygen keymaker keygenerator cracked regged winall win32 win64 winnt winnt2k x64 x86 "
    "multilingual macos macosx linux symbianos unattended activator".split()
)
# Music: the fields of Artist-Album-(CAT)-WEB-2023-GROUP that are tags, and the formats.
_MUSIC_TAGS = frozenset(
    "mp3 flac wav wv alac ape aac ogg cd cdm cds cdr cda 2cd 3cd 4cd 5cd 6cd lp ep vinyl vls "
    "single album web dvbs dvbc dvbt sat cable fm bootleg mixtape discography promo cdep "
    "ost live ddc mvid 320kbps 256kbps 192kbps 24bit 16bit hires bonus remastered deluxe "
    "reissue limited retail it de en fr uk us".split()
)
_MUSIC_NAMES = frozenset(
    "mp3 flac wav lp vinyl vls cdm cds cdr 2cd 3cd 4cd 320kbps 256kbps 192kbps mixtape discography bootleg dvbs".split()
)
_MUSIC_CUTS = frozenset(
    "mp3 flac wav wv alac ape aac ogg cd cdm cds cdr 2cd 3cd 4cd vinyl vls web 320kbps 256kbps 192kbps".split()
)
_MUSIC_FORMATS = ("flac", "wav", "alac", "ape", "mp3", "aac", "ogg")
_LOSSLESS = frozenset("flac wav wv alac ape hires 24bit".split())
_SPORT = frozenset(
    "nfl nba nhl mlb mls ufc wwe tna aew nascar formula1 f1 motogp moto2 moto3 indycar dtm wrc uefa "
    "fifa epl bundesliga laliga ligue1 seriea eredivisie euroleague atp wta pga wimbledon superbowl "
    "olympics wrestling smackdown boxing rugby cricket ipl afl nrl snooker darts ncaa ncaaf ncaab "
    "bellator ecw wcw premiership grandprix".split()
)
_DOCUMENTARY = frozenset("docu doku documentary doc".split())
_SEASON_WORDS = frozenset("season saison stagione seizoen staffel temporada series sezon".split())
_EPISODE_WORDS = frozenset("ep eps episode episodes episodio épisode".split())
_NUMBER_WORDS = {
    word: number
    for number, word in enumerate("zero one two three four five six seven eight nine ten eleven twelve".split())
}
_NUMBER_WORDS.update(
    {
        word: number
        for number, word in enumerate("zero un deux trois quatre cinq six sept huit neuf dix".split())
        if number
    }
)
_ROMAN = {
    roman: number + 1
    for number, roman in enumerate("i ii iii iv v vi vii viii ix x xi xii xiii xiv xv xvi xvii xviii xix xx".split())
}
# Course publishers before a bookware title; comics and magazine publishers are authors.
_PUBLISHERS = frozenset(
    "pluralsight udemy lynda linkedin skillshare packt oreilly o'reilly cbtnuggets "
    "infiniteskills coursera masterclass egghead frontendmasters".split()
)
# A Usenet reposter's tags after the release group (x264-GROUP-xpost).
_REPOST_TAGS = frozenset("xpost postbot asrequested obfuscated scrambled rp repost rakuv".split())

# What tokens tell the router (past the first token), as bits.
(
    B_XXX,
    B_BOOK,
    B_AUDIOBOOK,
    B_PLATFORM,
    B_OS,
    B_SOFTWARE,
    B_SOFTWARE_ALONE,
    B_MUSIC,
    B_SPORT,
    B_DOCUMENTARY,
    B_ANIME,
    B_IMAGESET,
    B_GRAND,
    B_PRIX,
) = (1 << n for n in range(14))
B_GRAND_PRIX = B_GRAND | B_PRIX
_BITS: dict[str, int] = {}
for _bit, _words_of_bit in (
    (B_XXX, ("xxx",)),
    (B_BOOK, _BOOK_TAGS),
    (B_AUDIOBOOK, _AUDIOBOOK_TAGS),
    (B_PLATFORM, _GAME_PLATFORMS),
    (B_OS, _OS_TAGS),
    (B_SOFTWARE, _SOFTWARE_TAGS),
    (B_SOFTWARE_ALONE, _SOFTWARE_ALONE),
    (B_MUSIC, _MUSIC_NAMES),
    (B_SPORT, _SPORT),
    (B_DOCUMENTARY, _DOCUMENTARY),
    (B_ANIME, ("anime",)),
    (B_IMAGESET, ("imageset",)),
    (B_GRAND, ("grand",)),
    (B_PRIX, ("prix",)),
):
    for _word in _words_of_bit:
        _BITS[_word] = _BITS.get(_word, 0) | _bit

# Single tokens.
_RESOLUTION = re.compile(r"(\d{3,4})[pi](?:\d{2,3}(?:fps)?)?|\d{3,4}[x×*](\d{3,4})[pi]?", re.IGNORECASE)
_SEASON_EPISODE = re.compile(r"s(\d{1,4})(?:(?:e|ep)(\d{1,4})(?:e\d{1,4})*|d(\d{1,2}))?", re.IGNORECASE)
_FULL_EPISODE = re.compile(r"s\d{1,4}e\d{1,4}", re.IGNORECASE)
_CROSS = re.compile(r"(\d{1,2}|(?:19|20)\d\d)x(\d{2,3})((?:x\d{2,3})*)", re.IGNORECASE)
_E_NUMBER = re.compile(r"(?:e|ep|eps|episode|episodio)(\d{1,4})", re.IGNORECASE)
_GLUED_SEASON = re.compile(r"(?:season|saison|stagione|seizoen|staffel|temporada)(\d{1,2})", re.IGNORECASE)
_BONUS = re.compile(r"x\d\d", re.IGNORECASE)  # an extra's number: Movie-(1999)-x02-Interview
_GLUED_TECH = re.compile(r"(hdtv|pdtv|webdl|dl|webrip)(x264|x265|h264|h265|xvid)", re.IGNORECASE)
_VERSION = re.compile(r"v\d{1,4}(?:\.\d{1,5})+[a-z]?|v\d{1,4}", re.IGNORECASE)

# Over the name, from a position.
# Words keep inner apostrophes (Howl's) and a resolution's cross (1280*720, 1920×1080).
_LEX = re.compile(r"[^\W_]+(?:['’*×][^\W_]+)*|[\[\](){}]|(?<=[\s._])-+(?=[\s._])|--+")
_EPISODE_AFTER_SEASON = re.compile(
    r"[ ._\-(\[]{0,4}(?:e|ep|eps|episode|episodio)[ .]?(\d{1,4})(?![\da-z])|[ ._]+-[ ._]+(\d{1,3})(?![\da-z])",
    re.IGNORECASE,
)
_EPISODE_LATER = re.compile(
    r"(?<![a-z0-9])(?:e|ep|eps|episode|episodio|épisode)[ .]?(\d{1,4})(?:-(\d{1,4}))?(?![\da-z])", re.IGNORECASE
)
_MORE_EPISODES = re.compile(
    r"(?:[ ._]?(?:(-)|\+|&|,|and)[ ._]?(?:s\d{1,4}|\d{1,2}x)?(?:e|ep)?(\d{1,4})|[ ._]?(?:e|ep)(\d{1,4}))"
    r"(?:(?![\da-z])|(?=e\d))",
    re.IGNORECASE,
)
# Absolute numbers after an episode (Bleach s16e03e04 313-314): at the end, or before tags.
_ABSOLUTE_AFTER = re.compile(
    r"[ ._]+(\d{3,4})(?:-(\d{3,4}))?(?=$|[ ._\[(]+(?:\d{3,4}p|hdtv|web|x26|h26|[\[(]))", re.IGNORECASE
)
_ANIME_NUMBER = re.compile(r"[ ._]?(\d{1,4})(?:v\d)?(?:-(\d{1,4})(?:v\d)?)?(?![\da-z])", re.IGNORECASE)
_SITE = re.compile(
    r"(?:www\.)?[\w-]+(?:\.[\w-]+)*\.(?:com|org|net|info|to|tv|me|cc|ru|io|se|nl|de|fr|eu|ws|biz)"
    r"\b|www\.",
    re.IGNORECASE,
)
_LEADING_BRACKET = re.compile(r"[\[(]([^\[\]()]*)[\])][\s._\-]*")
_LEADING_SITE = re.compile(r"(?:www\.)?[\w-]+\.(?:com|org|net|info|to|tv)[\s._]*-[\s._]*", re.IGNORECASE)
_SITE_ENDS = frozenset("com org net info to tv".split())
_GROUP_PREFIX = re.compile(r"[a-z0-9]{2,10}-(?=[a-z])")
_TRAILING_BRACKETS = re.compile(r"(?:[\s._\-]*(?:\[[^\[\]]{0,40}\]|\([^()]{0,40}\)))+\s*(?:/.*)?$")
_GROUP_WORD = re.compile(r"[^\s\-.\[\](){}]+")
_DASH_FIELDS = re.compile(r"-(?![^()]*\))")
_ALBUM_TAIL = re.compile(
    r"\s+[\[(](?:(?:19|20)\d\d|[^\])]*\b(?:flac|mp3|web|cd|vinyl|kbps|v0|24bit|16bit|lossless|"
    r"deluxe|remaster(?:ed)?|edition)\b[^\])]*)[\])].*$",
    re.IGNORECASE,
)
_WORD_SPLIT = re.compile(r"([ ._]+)")
_SEPARATORS = re.compile(r"[\s._]+")
_YEAR_IN = re.compile(r"(?<!\d)((?:19|20)\d\d)(?!\d)")
_UPDATE_VERSION = re.compile(r"[._ ]update[._ ]v\d", re.IGNORECASE)
_EDGE_JUNK = " .-_:,;~+/&|"
_TITLE_EDGES = _EDGE_JUNK + "([{"


# --- Tokens -----------------------------------------------------------------------------------


# A token is a list (cheaper to make than an object, and names have a dozen tokens): its place in
# the name, its text, its lower-cased text, class, field, value, number (for digits, else -1),
# whether it is a marker (_mark) and whether it is written as scene tags are (_scene_case).
_Token: TypeAlias = list[Any]
START, END, TEXT, LOWER, CLS, FIELD, VALUE, NUM, MARKER, SCENE = range(10)
# What a word says of its name, besides its class: video evidence (EV_STRONG: a resolution, a video
# codec, an episode marker, which only videos have; EV_MEDIUM: a video source, which games and
# programs name too), and whether a release group may follow it (a marker written as tags are).
EV_MEDIUM, EV_STRONG = 1, 2

# A word's reading by its text (what _word_info says of it): names share most of their words (tags,
# common title words), so a look-up replaces the vocabulary's and the patterns'. Cleared when it
# holds more than its bound at a miss; an entry takes about 250 bytes, 12 MB when full. Threads
# may share it: a dict's get and set are atomic, and a clear at worst reads a word again.
# ((the token's fields from LOWER on), router bits, video evidence, whether a release group may
# follow it, whether it is the second word of a pair)
_Info = tuple[tuple[str, int, int, str, int, bool, bool], int, int, bool, bool]
_NO_INFO: _Info = (("", WORD, F_NONE, "", -1, False, False), 0, 0, False, False)
_NO_TOKEN: _Token = [-2, -2, "", "", WORD, F_NONE, "", -1, False, False]  # before the first token
_WORD_INFOS: dict[str, _Info] = {}
_WORD_INFOS_MAX = 50_000
_STRUCTURE = {"[": OPEN, "(": OPEN, "{": OPEN, "]": CLOSE, ")": CLOSE, "}": CLOSE}


def clear_caches() -> None:
    """Forget the words seen (the word cache, see _WORD_INFOS)."""
    _WORD_INFOS.clear()


def _tokens(text: str) -> list[_Token]:
    return _scan(text)[0]


def _scan(text: str) -> tuple[list[_Token], int, int, int]:
    """The name's tokens, classified, pairs joined (Blu-Ray), dates found (2014.10.31); and what
    they tell, collected on the way (one pass): what the words past the first tell the router
    (B_...), their video evidence (EV_...), and where the first marker a release group may follow
    starts (len(text): none)."""
    tokens: list[_Token] = []
    previous: _Token = _NO_TOKEN
    years = False
    infos = _WORD_INFOS
    position = 0
    find = text.find
    bits = evidence = 0
    first_marker = len(text)
    # The first token's text and whether its reading says its bits do not count, kept here: the
    # word cache may be emptied part way through the name (_word_info), and a name must read the
    # same whatever was parsed before it (a node's process and a worker's read the same names).
    first_text, first_discounted = "", 0
    for word in _LEX.findall(text):
        start = find(word, position)
        position = end = start + len(word)
        info = infos.get(word)
        if info is None:
            info = _word_info(word)
        part, word_bits, word_evidence, gate, second = info
        if second and start - previous[END] == 1 and text[previous[END]] in "-. _":
            joined = _PAIRS.get((previous[LOWER], part[0]))
            if joined:
                previous[END] = end
                pair = previous[TEXT] = text[previous[START] : end]
                info = infos.get(pair) or _word_info(pair, joined)
                previous[LOWER:] = info[0]
                evidence |= info[2]
                if previous is tokens[0]:
                    first_text, first_discounted = pair, info[1]
                continue
            if joined is not None and previous[CLS] == NUMBER:  # 5.1 (audio): not a bare episode number
                previous[CLS] = WORD
        bits |= word_bits
        evidence |= word_evidence
        if gate and start < first_marker:
            first_marker = start
        if part[1] == YEAR:
            years = True
        previous = [start, end, word, *part]
        if not tokens:
            first_text, first_discounted = word, word_bits
        tokens.append(previous)
    if years:
        _find_dates(tokens, text)
    if tokens and (
        first_discounted if tokens[0][TEXT] == first_text else _WORD_INFOS.get(tokens[0][TEXT], _NO_INFO)[1]
    ):
        bits = 0  # the first word's bits do not count (xXx.2002 is a film): collect them again
        for token in tokens[1:]:
            bits |= _BITS.get(token[LOWER], 0)
    return tokens, bits, evidence, first_marker


def _word_info(word: str, pair: str | None = None) -> _Info:
    """A word's reading (pair: the vocabulary's word for a pair of words), kept in _WORD_INFOS."""
    if len(_WORD_INFOS) >= _WORD_INFOS_MAX:
        _WORD_INFOS.clear()
    first = word[0]
    lower = word.lower()
    if pair is not None:
        info: _Info = _info_of(word, pair)
    elif lower.isalpha() and lower not in _VOCAB and lower not in _SEASON_WORDS and lower not in _EPISODE_WORDS:
        # Most words read afresh are title words: their reading without the calls.
        info = ((lower, WORD, F_NONE, "", -1, False, False), _BITS.get(lower, 0), 0, False, lower in _PAIR_SECONDS)
    elif first in "[](){}":
        info = ((word, _STRUCTURE[first], F_NONE, "", -1, False, False), 0, 0, False, False)
    elif first == "-":
        info = ((word, DASH, F_NONE, "", -1, False, False), 0, 0, False, False)
    else:
        info = _info_of(word, lower)
    _WORD_INFOS[word] = info
    return info


def _info_of(word: str, lower: str) -> _Info:
    """A word's reading (_Info)."""
    lower, cls, field, value, number = _classified(word, lower)
    evidence = 0
    if cls == EPISODE:
        evidence = 0 if lower in _OS_TAGS else EV_STRONG  # S60 is a phone's OS
    elif cls == TECH:
        if field == F_RES or (field == F_CODEC and value):
            evidence = EV_STRONG
        elif field == F_SRC and value:
            evidence = EV_MEDIUM
    gate = cls in (TECH, YEAR, EPISODE) or (cls in (FLAG, LANG, UPPER) and word.isupper())
    scene = cls in (FLAG, LANG) and _scene_case(word)
    return (lower, cls, field, value, number, False, scene), _BITS.get(lower, 0), evidence, gate, lower in _PAIR_SECONDS


def _classified(word: str, lower: str) -> tuple[str, int, int, str, int]:
    """(lower, class, field, value, number) of a word: the vocabulary's, else its pattern's."""
    known = _VOCAB.get(lower)
    if known is not None:
        cls, field, value = known
        # Words the vocabulary knows in capitals only (DC, SE, US): title words otherwise.
        return lower, WORD if cls == UPPER and not word.isupper() else cls, field, value, -1
    if lower.isalpha():
        if lower in _SEASON_WORDS:
            return lower, SEASON, F_NONE, "", -1
        if lower in _EPISODE_WORDS:
            return lower, EPWORD, F_NONE, "", -1
        return lower, WORD, F_NONE, "", -1
    first = lower[0]
    if "0" <= first <= "9":
        if lower.isdecimal():
            number = int(lower)
            return lower, YEAR if len(lower) == 4 and 1900 <= number <= MAX_YEAR else NUMBER, F_NONE, "", number
        resolution = _RESOLUTION.fullmatch(lower)
        if resolution is not None:
            return lower, TECH, F_RES, resolution.group(1) or resolution.group(2), -1
        if _CROSS.fullmatch(lower) is not None:
            return lower, EPISODE, F_NONE, "", -1
        return lower, WORD, F_NONE, "", -1
    if first in "se" and (
        _SEASON_EPISODE.fullmatch(lower) or _E_NUMBER.fullmatch(lower) or _GLUED_SEASON.fullmatch(lower)
    ):
        return lower, EPISODE, F_NONE, "", -1
    if first == "x" and _BONUS.fullmatch(lower):
        return lower, TECH, F_NONE, "", -1
    glued = _GLUED_TECH.fullmatch(lower)
    if glued is not None:
        return lower, TECH, F_SRC, "web" if glued.group(1) in ("dl", "webdl", "webrip") else "hdtv", -1
    return lower, WORD, F_NONE, "", -1


_MONTH_NUMBERS = {
    name: number
    for number, names in enumerate(
        (
            "january jan januar janvier gennaio enero",
            "february feb februar fevrier février febbraio febrero",
            "march mar maerz märz mars marzo",
            "april apr avril aprile abril",
            "may mai maggio mayo",
            "june jun juni juin giugno junio",
            "july jul juli juillet luglio julio",
            "august aug aout août agosto",
            "september sep sept septembre settembre septiembre",
            "october oct oktober octobre ottobre octubre",
            "november nov novembre noviembre",
            "december dec dezember decembre décembre dicembre diciembre",
        ),
        1,
    )
    for name in names.split()
}
_DAY = re.compile(r"(\d{1,2})(?:st|nd|rd|th|er|e)?", re.IGNORECASE)


def _month_date(day: _Token, month: _Token, year: _Token) -> str | None:
    """3rd Nov 2014, 15 Januar 2004 (or, with day and month swapped, October 8 2014)."""
    number = _MONTH_NUMBERS.get(month[LOWER])
    found = _DAY.fullmatch(day[LOWER]) if number is not None else None
    if found is None or not 1 <= int(found.group(1)) <= 31:
        return None
    return f"{year[NUM]:04d}-{number:02d}-{int(found.group(1)):02d}"


def _find_dates(tokens: list[_Token], text: str) -> None:
    """Dates made of three tokens around a year: YYYY.MM.DD, DD.MM.YYYY, MM.DD.YYYY (two digits
    each, one separator alike between): the first token gets the date, the others are parts."""
    count = len(tokens)
    for index, token in enumerate(tokens):
        if token[CLS] != YEAR:
            continue
        found = None
        if index + 2 < count and tokens[index + 1][CLS] == NUMBER and tokens[index + 2][CLS] == NUMBER:
            found = _date_of(tokens[index], tokens[index + 1], tokens[index + 2], text, year_first=True)
            first = index
        if found is None and index >= 2 and tokens[index - 1][CLS] == NUMBER and tokens[index - 2][CLS] == NUMBER:
            found = _date_of(tokens[index - 2], tokens[index - 1], token, text, year_first=False)
            first = index - 2
        if (
            found is None
            and index >= 2
            and (tokens[index - 1][LOWER] in _MONTH_NUMBERS or tokens[index - 2][LOWER] in _MONTH_NUMBERS)
        ):
            found = _month_date(tokens[index - 2], tokens[index - 1], token) or _month_date(
                tokens[index - 1], tokens[index - 2], token
            )
            first = index - 2
        if found is not None:
            tokens[first][CLS], tokens[first][VALUE] = DATE, found
            tokens[first + 1][CLS] = tokens[first + 2][CLS] = DATEPART


def _date_of(a: _Token, b: _Token, c: _Token, text: str, year_first: bool) -> str | None:
    gap = text[a[END] : b[START]]
    if len(gap) != 1 or gap != text[b[END] : c[START]] or gap not in ".-_ ":
        return None
    if year_first:
        if len(b[LOWER]) != 2 or len(c[LOWER]) != 2 or not (b[LOWER].isdecimal() and c[LOWER].isdecimal()):
            return None
        year, month, day = a[NUM], int(b[LOWER]), int(c[LOWER])
    else:
        if len(a[LOWER]) != 2 or len(b[LOWER]) != 2 or not (a[LOWER].isdecimal() and b[LOWER].isdecimal()):
            return None
        first, second = int(a[LOWER]), int(b[LOWER])
        year = c[NUM]
        month, day = (first, second) if first <= 12 < second else (second, first)
    if 1 <= month <= 12 and 1 <= day <= 31:
        return f"{year:04d}-{month:02d}-{day:02d}"
    return None


def _short_date_of(a: _Token, b: _Token, c: _Token, text: str) -> str | None:
    """YY.MM.DD in three tokens (a site's date: Site.17.10.12.Title.XXX), when a valid date."""
    gap = text[a[END] : b[START]]
    if (
        len(gap) != 1
        or gap != text[b[END] : c[START]]
        or not all(len(t[TEXT]) == 2 and t[CLS] == NUMBER for t in (a, b, c))
    ):
        return None
    return _short_date(a[TEXT] + b[TEXT] + c[TEXT])


def _short_date(digits: str) -> str | None:
    """YYMMDD (At.Midnight.140722) or YYYYMMDD, when a valid date."""
    if len(digits) == 6:
        short = int(digits[:2])
        year = 2000 + short if 2000 + short <= MAX_YEAR else 1900 + short
        month, day = int(digits[2:4]), int(digits[4:])
    elif len(digits) == 8:
        year, month, day = int(digits[:4]), int(digits[4:6]), int(digits[6:])
        if not 1990 <= year <= MAX_YEAR:
            return None
    else:
        return None
    if 1 <= month <= 12 and 1 <= day <= 31:
        return f"{year:04d}-{month:02d}-{day:02d}"
    return None


def _scene_case(text: str) -> bool:
    """Written as scene tags are: in capitals, or mixed case as no title word is (LiMiTED,
    iNTERNAL, MULTi); never Limited or limited."""
    capitals = sum(1 for c in text if c.isupper())
    return capitals >= 2 and (capitals == len(text) or not text.istitle()) and len(text) > 2


def _mark(tokens: list[_Token], caps: bool) -> None:
    """Which tokens are markers (the module's doc), from the last to the first: a token that is
    one only when a marker follows looks at its successor's answer. In a name written all in
    capitals, capitals say nothing."""
    following: _Token | None = None
    after: _Token | None = None
    for token in reversed(tokens):
        cls = token[CLS]
        if cls == WORD:  # most tokens (made with MARKER false)
            after = following
            following = token
            continue
        if cls in (TECH, EPISODE, DATE, OPEN, DASH):
            token[MARKER] = True
        elif cls == YEAR:
            token[MARKER] = following is None or following[CLS] != YEAR
        elif cls in (FLAG, LANG):
            if not caps and token[SCENE]:
                token[MARKER] = True
            elif following is None:
                token[MARKER] = cls == LANG
            elif following[MARKER]:
                # Before a year or a bracket only a language (Noah.German.2014); before an
                # episode neither (The.Red.Line.S01E01).
                kind = following[CLS]
                token[MARKER] = kind in (TECH, FLAG, LANG, UPPER, WEAK) or (cls == LANG and kind in (YEAR, OPEN, DASH))
            else:
                token[MARKER] = False
        elif cls == UPPER:
            token[MARKER] = following is None or following[MARKER]
        elif cls == WEAK:
            token[MARKER] = (token[TEXT].isupper() and not caps) or (
                following is not None and following[MARKER] and following[CLS] in (TECH, FLAG, LANG)
            )
        elif cls == NUMBER:
            # A bare episode number before technical markers (the.mentalist.501.hdtv: S05E01).
            token[MARKER] = _bare_episode(token[NUM], len(token[TEXT])) and (
                following is None or (following[MARKER] and following[CLS] in (TECH, FLAG, LANG, UPPER))
            )
            if not token[MARKER] and len(token[TEXT]) in (6, 8) and following is not None:
                short = _short_date(token[TEXT])
                if short is not None:
                    token[CLS], token[VALUE], token[MARKER] = DATE, short, True
        elif cls == SEASON:
            token[MARKER] = (
                following is not None
                and _season_number(following) is not None
                and (token[LOWER] != "series" or following[CLS] == NUMBER)
            )
        elif cls == EPWORD:
            token[MARKER] = following is not None and (
                following[CLS] == EPISODE
                or (following[CLS] == NUMBER and len(following[TEXT]) <= 3 and (after is None or after[CLS] != WORD))
            )
        else:
            token[MARKER] = False
        if cls != CLOSE and cls != GROUP:
            after = following
            following = token


def _bare_episode(number: int, digits: int) -> bool:
    """Whether a bare number can be a season and an episode (501: S05E01; 2401: S24E01)."""
    if digits == 3:
        return number >= 100
    if digits == 4:
        return not 1900 <= number <= 2100 and 10 <= number // 100 <= 40
    return False


def _season_number(token: _Token) -> int | None:
    if token[CLS] == NUMBER and token[NUM] <= 99:
        return int(token[NUM])
    return _ROMAN.get(token[LOWER]) if token[LOWER] in _ROMAN else _NUMBER_WORDS.get(token[LOWER])


def _video_evidence(tokens: list[_Token]) -> int:
    """EV_STRONG and EV_MEDIUM of the tokens that are not the release group's."""
    evidence = 0
    for token in tokens:
        if token[CLS] != GROUP:
            evidence |= _info_of(token[TEXT], token[LOWER])[2]
    return evidence


def _release_group(text: str, first_marker: int) -> tuple[str | None, int]:
    """The group after the last dash (x264-GROUP), past trailing [site] tags and reposters' tags,
    when a marker comes before it; and where it starts (len(text) when none)."""
    trimmed = text
    if text[-1] in ")]" or " / " in text:
        trimmed = _TRAILING_BRACKETS.sub("", text).rstrip(" .")
    for _ in range(3):
        head, dash, group = trimmed.rpartition("-")
        if not dash or not 2 <= len(group) <= 30 or not (group.isalnum() or _GROUP_WORD.fullmatch(group)):
            return None, len(text)
        lower = group.lower()
        if lower in _REPOST_TAGS:
            trimmed = head
            continue
        known = _VOCAB.get(lower)
        if (
            (known is not None and known[0] in (TECH, WEAK))
            or group[:4].isdecimal()
            or (lower[0] in "0123456789s" and (_RESOLUTION.fullmatch(lower) or _FULL_EPISODE.fullmatch(lower)))
        ):
            return None, len(text)
        start = len(head) + 1
        if first_marker >= start:
            return None, len(text)
        return group, start
    return None, len(text)


# --- The reader -------------------------------------------------------------------------------


def _credited(text: str) -> tuple[str | None, str]:
    """(who, what) of "Who - What" (an album's artist, a book's author), the first of the usual
    separators that splits the name in two; (None, text) when none does."""
    for separator in ("_-_", " - ", "--", ".-."):
        head, found, rest = text.partition(separator)
        if found and head and rest:
            return head, rest
    return None, text


class _Reader:
    """One name read: its tokens and their markers, then the fields of its kind."""

    def __init__(self, text: str, extension: str, hint: str | None) -> None:
        self.text = text
        self.extension = extension
        self.hint = hint
        tokens, self.bits, evidence, first_marker = _scan(text)
        self.tokens = tokens
        self.group, group_start = _release_group(text, first_marker)
        if self.group is not None:
            told = False
            for token in reversed(tokens):
                if token[START] < group_start:
                    break
                told = told or token[CLS] in (TECH, EPISODE)
                token[CLS] = GROUP
            if told:  # the group's words said nothing of the name (x264-S8)
                evidence = _video_evidence(tokens)
        self.strong = bool(evidence & EV_STRONG)
        self.medium = bool(evidence & EV_MEDIUM)

    @property
    def lowers(self) -> set[str]:
        """The name's words, lower-cased (for the rarer kinds' readers)."""
        return {t[LOWER] for t in self.tokens}

    def read(self) -> ParsedName:
        """The kinds told by their own tags first (xxx, books, games, programs, music), then a
        video's reading, which every other name gets."""
        tokens = self.tokens
        if not tokens:
            return NOTHING
        bits = self.bits
        strong = self.strong
        if bits & B_XXX:
            return self._xxx()
        if self.extension == "book" or (not strong and bits & B_BOOK):
            return self._book()
        if self.extension != "video":
            if not strong:
                if bits & B_PLATFORM:
                    platform = self._platform()
                    if platform is not None:
                        return self._game(platform)
                if self.text.rpartition("-")[2].lower() in _GAME_GROUPS:
                    return self._game("pc")
                version = self._version_at() if "v" in self.text or "V" in self.text else None
                if (version is not None and (not self.medium or bits & (B_SOFTWARE | B_OS))) or bits & B_SOFTWARE_ALONE:
                    return self._software(version)
            if self.extension == "music" or self._music_like(strong or self.medium):
                return self._music()
            if self.hint == "book" and not strong and not self.medium:
                # In a group of books, a name that tells no kind of its own is a book's: a year
                # and a language ("Author - Title (1961) [FR]") are a book's as often as a film's.
                return self._book()
        return self._video()

    def _platform(self) -> str | None:
        for token in self.tokens:
            platform = _GAME_PLATFORMS.get(token[LOWER])
            if platform is not None and token[START] > 0:
                return platform
        return None

    def _version_at(self) -> int | None:
        """Where a program's version starts (v1.2.3, a token of its own), or None."""
        text = self.text
        for match in _VERSION.finditer(text):
            start, end = match.start(), match.end()
            if start == 0 or text[start - 1] not in " ._-" or (end < len(text) and text[end] not in " ._-"):
                continue
            if "." not in match.group() and not _VERSION.match(text, end + 1):
                continue  # a lone "v2" is a version only beside another one (V1.v1.2)
            return start
        return None

    def _music_like(self, video: bool) -> bool:
        """Whether a name is music's: a format tag, a music group as the hint, or the scene's
        audio layout (Artist-Album-(CAT)-WEB-2023-GROUP: words joined by underscores, fields by
        dashes, -YEAR-GROUP at the end); with video markers, a music video in that layout."""
        text = self.text
        if video and (" " in text or "_" not in text):
            return False
        if "-" not in text or (" " in text and " - " not in text):
            fields: list[str] = []
        else:
            fields = _DASH_FIELDS.split(text)
        layout = len(fields) >= 3 and " " not in text
        ends_with_year = len(fields) >= 3 and _is_year(fields[-2].strip("()"))
        if video:
            return layout and ends_with_year and "_" in fields[0]
        if self.bits & B_MUSIC or self.hint == "music":
            return True
        if layout and ("_" in text or any(f.lower().strip("()") in _MUSIC_TAGS for f in fields[1:])):
            return True
        return ends_with_year and not any(t[CLS] in (TECH, EPISODE, DATE) for t in self.tokens)

    # -- video --

    def _video(self) -> ParsedName:
        text = self.text
        tokens = self.tokens
        count = len(tokens)
        first = 0
        anime_group = None
        # What comes before the title: a site, technical tags, an anime group in brackets.
        lead = _LEADING_BRACKET.match(text) if text[0] in "[(" else None
        if lead is not None:
            while first < count and tokens[first][START] < lead.end():
                first += 1
            inner = [t for t in tokens[:first] if t[CLS] not in (OPEN, CLOSE, DASH)]
            inside = lead.group(1).strip()
            if inner and not _SITE.search(inside) and not all(t[CLS] in (TECH, UPPER) for t in inner) and first < count:
                anime_group = inside
        else:
            site = (
                _LEADING_SITE.match(text)
                if count > 2 and (tokens[1][LOWER] in _SITE_ENDS or tokens[2][LOWER] in _SITE_ENDS)
                else None
            )
            if site is not None:
                while first < count and tokens[first][START] < site.end():
                    first += 1
            elif count > 5 and text.islower() and _GROUP_PREFIX.match(text):
                # group-some.title.here.2016.1080p (a lower-case file name with its group first)
                plain = [t for t in tokens[1:5] if t[CLS] == WORD]
                if len(plain) >= 3 and all(text[t[START] - 1] == "." for t in plain[1:]):
                    first = 1
        _mark(tokens, caps=text.isupper())
        start = first
        while start < count and tokens[start][CLS] in (TECH, DASH, OPEN, CLOSE):
            start += 1
        end = start + 1
        while end < count and not tokens[end][MARKER]:
            end += 1
        if anime_group is not None and end < count and tokens[end][CLS] == DASH:
            # An anime's title may hold dashes: it runs to the dash before the episode's number.
            for index in range(end, count - 1):
                token = tokens[index]
                if (
                    token[CLS] == DASH
                    and tokens[index + 1][CLS] in (NUMBER, YEAR)
                    and len(tokens[index + 1][TEXT]) <= 4
                ):
                    end = index
                    break
                if token[CLS] not in (WORD, DASH, NUMBER, YEAR):
                    break
        fields = _VideoFields()
        # A year that starts the title is the title's (2012.2009.720p, 2001.A.Space.Odyssey.1968),
        # or the year when words follow it and no other year (2009.shoot.fruit.chan.dvd9).
        if (
            start < count
            and tokens[start][CLS] == YEAR
            and end - start > 1
            and all(t[CLS] == WORD for t in tokens[start + 1 : end])
            and not any(t[CLS] in (YEAR, EPISODE, DATE) for t in tokens[end:])
        ):
            fields.year = tokens[start][NUM]
            start += 1

        index = end
        numbered = False  # whether the season, episodes or air date are read (the first marker of them wins)
        while index < count:
            token = tokens[index]
            cls = token[CLS]
            if cls == WORD:
                index += 1
                continue
            if cls == GROUP:
                break
            if not numbered and cls in _NUMBERING_CLASSES:
                if cls == EPISODE:
                    numbered = True
                    index = self._episode_at(index, fields)
                    continue
                if cls == DATE:
                    numbered = True
                    fields.air_date = token[VALUE]
                    index += 1
                    continue
                if cls == SEASON and token[MARKER]:
                    numbered = True
                    fields.season = _season_number(tokens[index + 1])
                    later = _EPISODE_LATER.search(text, tokens[index + 1][END])
                    fields.episodes = _episode_range(later) if later else []
                    index += 2
                    continue
                if cls == EPWORD and token[MARKER]:
                    later = _EPISODE_LATER.match(text, token[START])
                    if later is not None:
                        numbered = True
                        fields.episodes = _episode_range(later)
                        index = _index_after(tokens, index, later.end())
                        continue
                if cls == NUMBER and token[MARKER]:
                    numbered = fields.from_number = True
                    fields.season, fields.episodes = token[NUM] // 100, [token[NUM] % 100]
                    index += 1
                    continue
            if cls == YEAR:
                if fields.year is None:
                    fields.year = token[NUM]
                    following = tokens[index + 1] if index + 1 < count else None
                    if (
                        following is not None
                        and following[CLS] == EPISODE
                        and following[LOWER][0] == "e"
                        and fields.season is None
                    ):
                        fields.season_year = token[NUM]  # Show.1991.E01: the year numbers the season
            elif token[MARKER] and cls in _FIELD_CLASSES:
                fields.take(token, tokens[index + 1] if index + 1 < count else None)
            index += 1
        if start:
            for token in tokens[:start]:
                if token[CLS] == TECH:
                    fields.take(token, None)
        if fields.season is None and fields.episodes and fields.season_year is not None:
            fields.season = fields.season_year
        title = _title(
            text[
                tokens[start][START] if start < count else len(text) : tokens[end][START] if end < count else len(text)
            ]
        )

        # "[Group] Show - 214": an anime's absolute number; "Show - 102": a season's episode.
        absolute = fields.absolute
        if fields.season is None and fields.episodes is None and end < count and tokens[end][CLS] == DASH:
            number = _ANIME_NUMBER.match(text, tokens[end][END])
            if number is not None and anime_group is not None:
                low = int(number.group(1))
                high = int(number.group(2)) if number.group(2) else low
                absolute = list(range(low, high + 1)) if low < high <= low + 200 else [low]
            elif number is not None and not number.group(2) and not _is_year(number.group(1)):
                # Show - 102: season 1, episode 2 (as the.mentalist.501); Show - 05: episode 5.
                value = int(number.group(1))
                if _bare_episode(value, len(number.group(1))):
                    fields.season, fields.episodes = value // 100, [value % 100]
                elif value < 100:
                    fields.episodes = [value]

        bits = self.bits
        tags = fields.tags
        if anime_group is not None or bits & B_ANIME:
            tags.append("anime")
        sport = bool(bits & B_SPORT) or tokens[0][LOWER] in _SPORT or (bits & B_GRAND_PRIX) == B_GRAND_PRIX
        if sport:
            tags.append("sport")
            if fields.from_number:  # UFC.179: an event's number, not an episode
                fields.season = fields.episodes = None
        if bits & B_DOCUMENTARY:
            tags.append("documentary")
        if (
            fields.season is not None
            or fields.episodes is not None
            or fields.air_date is not None
            or absolute is not None
            or sport
        ):
            kind = "tv"
        elif fields.evidence or self.extension == "video" or fields.year is not None:
            kind = "movie"
        else:
            kind = self.hint if self.hint in ("tv", "movie") else "other"
        year = fields.year
        if year is None and fields.air_date is not None:
            year = int(fields.air_date[:4])
        if year is None and fields.season is not None and 1900 <= fields.season <= MAX_YEAR:
            year = fields.season
        episodes = fields.episodes
        if episodes is None and fields.season is not None and "disc" not in tags:
            episodes = []  # a season pack
        # Most names are videos: their ParsedName is made as a tuple, in the fields' order (a fifth
        # of the keyword call's time).
        return _new_parsed(
            ParsedName,
            (
                kind,
                title,
                year,
                fields.season,
                tuple(episodes) if episodes is not None else None,
                tuple(absolute) if absolute else None,
                fields.air_date,
                fields.resolution(),
                fields.folded_source(),
                fields.codec,
                tuple(fields.languages),
                anime_group or self.group,
                fields.proper,
                fields.repack,
                None,
                None,
                None,
                None,
                None,
                False,
                tuple(dict.fromkeys(tags)) if tags else (),
            ),
        )

    def _episode_at(self, index: int, fields: _VideoFields) -> int:
        """Read the episode marker at tokens[index] into fields; the index after it."""
        tokens = self.tokens
        text = self.text
        token = tokens[index]
        lower = token[LOWER]
        match = _SEASON_EPISODE.fullmatch(lower)
        if match is not None:
            fields.season = int(match.group(1))
            if match.group(3):  # a disc of the season: S07D1
                fields.tags.append("disc")
                return index + 1
            if match.group(2) is not None:
                episodes = [int(match.group(2))]
                end = token[START] + match.end(2)
            else:
                after = _EPISODE_AFTER_SEASON.match(text, token[END])
                if after is None:
                    later = _EPISODE_LATER.search(text, token[END])
                    fields.episodes = _episode_range(later) if later else []
                    return index + 1
                episodes = [int(after.group(1) or after.group(2))]
                end = after.end()
            end = _more_episodes(text, end, episodes)
            fields.episodes = episodes
            absolute = _ABSOLUTE_AFTER.match(text, end)
            if absolute is not None and not _is_year(absolute.group(1)):
                low = int(absolute.group(1))
                high = int(absolute.group(2)) if absolute.group(2) else low
                if low > max(episodes, default=0):
                    fields.absolute = list(range(low, high + 1)) if low < high <= low + 50 else [low]
                    end = absolute.end()
            return _index_after(tokens, index, end)
        match = _CROSS.fullmatch(lower)
        if match is not None:
            fields.season = int(match.group(1))
            episodes = [int(match.group(2))]
            if match.group(3):
                episodes.extend(int(n) for n in match.group(3).split("x") if n)
            fields.episodes = episodes
            if 1900 <= fields.season <= MAX_YEAR and fields.year is None:
                fields.year = fields.season
            return _index_after(tokens, index, _more_episodes(text, token[END], episodes))
        match = _GLUED_SEASON.fullmatch(lower)
        if match is not None:
            fields.season = int(match.group(1))
            later = _EPISODE_LATER.search(text, token[END])
            fields.episodes = _episode_range(later) if later else []
            return _index_after(tokens, index, later.end()) if later else index + 1
        match = _E_NUMBER.fullmatch(lower)
        if match is not None:
            episodes = [int(match.group(1))]
            end = _more_episodes(text, token[END], episodes)
            fields.episodes = episodes
            return _index_after(tokens, index, end)
        return index + 1

    # -- music --

    def _music(self) -> ParsedName:
        text = self.text
        artist, body = _credited(text)
        fields = [f for f in _DASH_FIELDS.split(body) if f]
        if len(fields) >= 2:
            fields = fields[:-1]  # the release group
        if (
            artist is None
            and len(fields) >= 2
            and not _is_year(fields[1].strip("()"))
            and (not _is_music_tag(fields[1]) or _album_before_tags(fields))
        ):
            artist, fields = fields[0], fields[1:]
        album = _cut_at(fields[0], _MUSIC_CUTS) if fields else None
        if album is not None and (" (" in album or " [" in album):
            album = _ALBUM_TAIL.sub("", album)
        year = next((int(f.strip("()")) for f in reversed(fields[1:]) if _is_year(f.strip("()"))), None)
        if year is None:
            year = _last_year(body)
        lowers = {f.lower().strip("()") for f in fields[1:]} | self.lowers
        music_format = next((f for f in _MUSIC_FORMATS if f in lowers), None)
        tags = []
        if lowers & _LOSSLESS:
            tags.append("lossless")
        resolution = None
        if self.strong:
            tags.append("video")
            heights = [t[VALUE] for t in self.tokens if t[CLS] == TECH and t[FIELD] == F_RES]
            resolution = _folded_resolution(heights[0]) if heights else None
        if artist is not None:
            artist = _title(artist)
            if artist is not None and artist.lower() in ("va", "various artists", "various"):
                artist = "Various"
        album = _title(album) if album else None
        return ParsedName(
            kind="music",
            title=album,
            year=year,
            artist=artist,
            album=album,
            format=music_format,
            release_group=self.group or (_DASH_FIELDS.split(body)[-1] if "-" in body else None),
            resolution=resolution,
            tags=tuple(tags),
        )

    # -- books --

    def _book(self) -> ParsedName:
        text = self.text
        lowers = self.lowers
        if lowers & _AUDIOBOOK_TAGS or self.extension == "music":
            book_format = "audiobook"
        elif "bookware" in lowers:
            book_format = "bookware"
        elif lowers & {"magazine", "magazines"}:
            book_format = "magazine"
        elif lowers & {"comic", "comics", "cbr", "cbz"}:
            book_format = "comic"
        else:
            book_format = next((f for f in ("epub", "pdf", "mobi", "azw3") if f in lowers), "ebook")
        author, body = _credited(text)
        year: int | None
        if " " not in body and "." not in body.split("-")[0] and ("_" in body or body.count("-") >= 2):
            # The audio layout: Author-Title-(Audiobook)-DE-2001-GROUP, or no author.
            fields = [f for f in _DASH_FIELDS.split(body) if f]
            if author is None and len(fields) >= 2 and not _is_book_tag(fields[1]):
                author, fields = fields[0], fields[1:]
            title_text = fields[0] if fields else body
            year = next((int(f.strip("()")) for f in reversed(fields[1:]) if _is_year(f.strip("()"))), None)
        else:
            title_text, year = _book_title(body)
        numbered = _NUMBERING.match(title_text)
        if numbered is not None and numbered.end() < len(title_text):
            title_text = title_text[numbered.end() :]
        if author is not None:
            author = _NUMBERING_AT_END.sub("", author) or author
        elif book_format == "bookware":
            words = _SEPARATORS.split(title_text, maxsplit=1)
            if len(words) == 2 and words[0].lower() in _PUBLISHERS:
                author, title_text = words
        if year is None:
            year = _first_year(text)
        languages = tuple(
            dict.fromkeys(
                t[VALUE]
                for t in self.tokens
                if t[FIELD] == F_LANG and t[START] > 0 and t[CLS] in (TECH, LANG) and t[VALUE] not in ("multi", "dual")
            )
        )
        return ParsedName(
            kind="book",
            title=_title(title_text),
            year=year,
            author=_title(author) if author else None,
            format=book_format,
            languages=languages,
            release_group=self._any_group(),
            tags=(book_format,) if book_format in ("audiobook", "bookware", "magazine", "comic") else (),
        )

    # -- games and programs --

    def _any_group(self) -> str | None:
        """The release group of a program, a game or a book: after the last dash, markers before
        it or not (Neat.Video.Pro.v5.1.5.WinALL-DVT)."""
        return self.group or _release_group(self.text, 0)[0]

    def _game(self, platform: str) -> ParsedName:
        title, year = self._product_title(self._version_at())
        return ParsedName(kind="game", title=title, year=year, platform=platform, release_group=self._any_group())

    def _software(self, version: int | None) -> ParsedName:
        platform = next((_OS_TAGS[t[LOWER]] for t in self.tokens if t[LOWER] in _OS_TAGS and t[START] > 0), None)
        # Game updates are named Game.Update.v1.03; a Mac or Linux name without a version is a game.
        game = _UPDATE_VERSION.search(self.text) is not None or (platform in ("mac", "linux") and version is None)
        title, year = self._product_title(version)
        if game and platform is None:
            platform = "pc"
        return ParsedName(
            kind="game" if game else "software",
            title=title,
            year=year,
            platform=platform,
            release_group=self._any_group(),
        )

    def _product_title(self, version: int | None) -> tuple[str | None, int | None]:
        """A game's or a program's title: up to its version, update, platform, OS, language or
        crack tags (years stay in it: "TweakNow PowerPack 2003 Professional"); and its year."""
        cut = version if version is not None else len(self.text)
        for token in self.tokens:
            if token[START] >= cut:
                break
            lower = token[LOWER]
            if token[START] > 0 and (
                lower in _GAME_PLATFORMS
                or lower in _OS_TAGS
                or lower in _SOFTWARE_TAGS
                or lower in _PRODUCT_CUTS
                or lower in _GAME_GROUPS
                or token[CLS] == GROUP
                or (token[CLS] in (TECH, LANG) and token[FIELD] == F_LANG)
            ):
                cut = token[START]
                break
        year = next((t[NUM] for t in self.tokens if t[CLS] == YEAR), None)
        return _title(self.text[:cut]), year

    # -- xxx --

    def _xxx(self) -> ParsedName:
        tokens = self.tokens
        text = self.text
        _mark(tokens, caps=text.isupper())
        xxx_at = next(i for i, t in enumerate(tokens) if t[LOWER] == "xxx" and i > 0)
        start = 0
        air_date = None
        # Site.YY.MM.DD.Performers.Title.XXX, Site.E123.Title.XXX: the title follows the date.
        for index in range(xxx_at):
            token = tokens[index]
            if token[CLS] == DATE:
                air_date, start = token[VALUE], index + 3
                break
            if index + 2 < xxx_at and token[START] > 0 and token[CLS] == NUMBER:
                short = _short_date_of(token, tokens[index + 1], tokens[index + 2], text)
                if short is not None:
                    air_date, start = short, index + 3
                    break
            if token[CLS] == EPISODE and index > 0:
                start = index + 1
                break
        # Without a date or a number, the title ends at its first marker, as a video's does.
        end = next((i for i in range(1, xxx_at) if tokens[i][MARKER]), xxx_at) if start == 0 else xxx_at
        title = _title(text[tokens[start][START] : tokens[end][START]]) if start < end else None
        fields = _VideoFields()
        for token in tokens[xxx_at + 1 :]:
            if token[CLS] in (TECH, UPPER):
                fields.take(token, None)
        tags = fields.tags
        if self.bits & B_IMAGESET:
            tags.append("imageset")
        year = int(air_date[:4]) if air_date else next((t[NUM] for t in tokens if t[CLS] == YEAR), None)
        return ParsedName(
            kind="xxx",
            title=title,
            year=year,
            air_date=air_date,
            resolution=fields.resolution(),
            source=fields.folded_source(),
            codec=fields.codec,
            release_group=self.group,
            tags=tuple(tags),
        )


_NUMBERING_CLASSES = frozenset({EPISODE, DATE, SEASON, EPWORD, NUMBER})
_FIELD_CLASSES = frozenset({TECH, UPPER, WEAK, FLAG, LANG})
_PRODUCT_CUTS = frozenset(
    "update dvd5 dvd9 pal ntsc usa eur jpn multi5 multi3 bluray blueray iso proper readnfo "
    "read dlc clone repack rip vc".split()
)
_SUBTITLE_WORDS = frozenset("sub subs subbed subtitles subtitled".split())


class _VideoFields:
    """A video name's fields, as its tokens give them (the first of each kind wins)."""

    __slots__ = (
        "year",
        "season",
        "season_year",
        "episodes",
        "absolute",
        "air_date",
        "heights",
        "sources",
        "codec",
        "languages",
        "proper",
        "repack",
        "tags",
        "evidence",
        "from_number",
    )

    def __init__(self) -> None:
        self.year: int | None = None
        self.season: int | None = None
        self.season_year: int | None = None
        self.episodes: list[int] | None = None
        self.absolute: list[int] | None = None
        self.air_date: str | None = None
        self.heights: list[str] = []
        self.sources: list[str] = []
        self.codec: str | None = None
        self.languages: list[str] = []
        self.proper = False
        self.repack = False
        self.tags: list[str] = []
        self.evidence = False
        self.from_number = False  # the season and episode are a bare number's (the.mentalist.501)

    def take(self, token: _Token, following: _Token | None) -> None:
        """Keep what a marker token says (following: the token after it, or None)."""
        field = token[FIELD]
        value = token[VALUE]
        if field == F_RES:
            self.heights.append(value)
            self.evidence = True
        elif field == F_SRC:
            self.sources.append(value)
            self.evidence = True
            if not value:
                lower = token[LOWER]
                if lower in ("cam", "camrip", "hdcam"):
                    self.tags.append("cam")
                elif lower in ("ts", "hdts", "telesync", "tc", "telecine", "hdtc"):
                    self.tags.append("telesync")
                elif lower in ("scr", "screener", "bdscr"):
                    self.tags.append("screener")
            elif token[LOWER] in (
                "bd25",
                "bd50",
                "bdmv",
                "bdiso",
                "uhdbd",
                "dvdr",
                "dvd5",
                "dvd9",
                "dvdiso",
                "bd5",
                "bd9",
            ):
                self.tags.append("disc")
        elif field == F_CODEC:
            if self.codec is None and value:
                self.codec = value
            self.evidence = True
        elif field == F_LANG:
            # A language before "Sub" is the subtitles' (German.Sub), not the audio's.
            if value not in self.languages and (following is None or following[LOWER] not in _SUBTITLE_WORDS):
                self.languages.append(value)
        elif field == F_FLAG:
            lower = token[LOWER]
            if value == "repack":
                self.repack = True
            elif value == "proper":
                self.proper = True
            elif lower in ("3d", "hsbs", "hou", "sbs"):
                self.tags.append("3d")
            elif lower == "remux":
                self.tags.append("remux")
            elif lower == "complete":
                self.tags.append("complete")
            elif lower == "ts":
                self.tags.append("telesync")
        elif field == F_AUDIO:
            self.evidence = True

    def resolution(self) -> str | None:
        """The first resolution stated (4K and UHD only when no other is)."""
        for height in self.heights:
            if not height.endswith("w"):
                return _folded_resolution(height)
        return "2160p" if "2160w" in self.heights else None

    def folded_source(self) -> str | None:
        """The first of the four sources the name states; web when it names a streaming service only."""
        for source in self.sources:
            if source and source != "web?":
                return source
        return "web" if "web?" in self.sources else None


def _folded_resolution(height: str) -> str | None:
    return height + "p" if height in ("480", "576", "720", "1080", "2160") else None


def _episode_range(match: re.Match[str]) -> list[int]:
    low = int(match.group(1))
    if match.group(2):
        high = int(match.group(2))
        if low < high <= low + 100:
            return list(range(low, high + 1))
    return [low]


def _more_episodes(text: str, end: int, episodes: list[int]) -> int:
    """Episodes after the first: E01E02, E01-E02, E01-04 (a range), E01+02, & S01E03; where
    they end."""
    while True:
        more = _MORE_EPISODES.match(text, end)
        if more is None:
            return end
        number = int(more.group(2) or more.group(3))
        last = episodes[-1]
        if number <= last or number > last + 100:
            return end
        if more.group(1):
            episodes.extend(range(last + 1, number + 1))
        else:
            episodes.append(number)
        end = more.end()


def _index_after(tokens: list[_Token], index: int, end: int) -> int:
    while index < len(tokens) and tokens[index][START] < end:
        index += 1
    return index


def _is_year(text: str) -> bool:
    return len(text) == 4 and text.isdecimal() and 1900 <= int(text) <= MAX_YEAR


def _first_year(text: str) -> int | None:
    for match in _YEAR_IN.finditer(text):
        if int(match.group(1)) <= MAX_YEAR:
            return int(match.group(1))
    return None


def _last_year(text: str) -> int | None:
    years = [int(m.group(1)) for m in _YEAR_IN.finditer(text) if int(m.group(1)) <= MAX_YEAR]
    return years[-1] if years else None


# Books: numbering before a title (Folge_212_, SE_117_, F20_) or after an author (Saga.Band.05).
_NUMBERING = re.compile(
    r"(?:folge|f|se|band|teil|vol|volume|tome|t|nr|no|heft|part|book|buch|episode|ep|kapitel|chapter)[ ._]?\d{1,4}"
    r"[ ._]+",
    re.IGNORECASE,
)
_NUMBERING_AT_END = re.compile(
    r"[ ._]+(?:band|teil|vol|volume|tome|nr|no|heft|book|buch|folge)[ ._]?\d{1,4}$", re.IGNORECASE
)
_BOOK_CUT_WORDS = frozenset("no nr issue ausgabe heft vol volume band tome teil part".split())
_BOOK_STOPS = _BOOK_TAGS | frozenset("retail hybrid updated repack proper presseheft".split())
_ISSUE = re.compile(r"n\d{1,4}|#\d{1,4}", re.IGNORECASE)
# A book's year may be older than a film's (MIN_BOOK_YEAR on, against 1900): alone in brackets,
# as a book's name gives the year it was written ("Author - Title (1885) [FR]").
MIN_BOOK_YEAR = 1000


def _book_title(body: str) -> tuple[str, int | None]:
    """A book's title from a dotted or spaced name: up to an issue number, a date, a month and
    year, a year or a tag; and the year."""
    tokens = _tokens(body)
    cut = len(body)
    older: int | None = None  # a year before films', alone in brackets
    for index in range(1, len(tokens)):
        token = tokens[index]
        lower = token[LOWER]
        following = tokens[index + 1] if index + 1 < len(tokens) else None
        if (
            token[CLS] == NUMBER
            and len(lower) == 4
            and MIN_BOOK_YEAR <= token[NUM] < 1900
            and tokens[index - 1][CLS] == OPEN
            and following is not None
            and following[CLS] == CLOSE
        ):
            cut, older = tokens[index - 1][START], token[NUM]
            break
        if (
            (lower in _BOOK_CUT_WORDS and following is not None and following[LOWER].isdecimal())
            or _ISSUE.fullmatch(lower)
            or token[CLS] in (YEAR, DATE)
            or lower in _BOOK_STOPS
            or (
                lower.isdecimal()
                and following is not None
                and (following[LOWER] in _MONTH_NUMBERS or following[LOWER].isdecimal())
            )
            or (lower in _MONTH_NUMBERS and (following is None or following[CLS] == YEAR))
            or (token[FIELD] == F_LANG and token[CLS] in (TECH, LANG))
        ):
            cut = token[START]
            break
    dated = next((t[VALUE] for t in tokens if t[CLS] == DATE), None)
    year = int(dated[:4]) if dated else next((t[NUM] for t in tokens if t[CLS] == YEAR), older)
    return body[:cut], year


def _is_book_tag(field: str) -> bool:
    lower = field.lower().strip("()")
    return lower in _BOOK_TAGS or bool(re.fullmatch(r"\d?cds?|mp3cd|de|en|f\d+|\d+cds?", lower))


def _is_music_tag(field: str) -> bool:
    lower = field.lower().strip("()")
    return lower in _MUSIC_TAGS or bool(re.fullmatch(r"\d+cds?|\d+lp|[a-z]{1,6}\d+[a-z\d]*|\d+", lower))


def _album_before_tags(fields: list[str]) -> bool:
    """Whether a second field that reads as a tag (a number, "Album") is an album all the same:
    a year or a tag follows it, and it is no format, source or bracketed tag (Adele-25-2015-FLAC,
    but not Album-WEB-2020 or Album-(Single)-2020)."""
    second = fields[1]
    return (
        len(fields) >= 3
        and not second.startswith("(")
        and second.lower() not in _MUSIC_CUTS
        and (_is_year(fields[2].strip("()")) or _is_music_tag(fields[2]))
    )


def _cut_at(field: str, stops: frozenset[str]) -> str:
    """A field's words up to the first that is a tag (blue_cd_beryl: blue)."""
    parts = _WORD_SPLIT.split(field)
    for index in range(2, len(parts), 2):
        if parts[index].lower() in stops:
            return "".join(parts[: index - 1])
    return field


def _title(raw: str | None) -> str | None:
    """A title as people write it: separators (dots, underscores) as spaces, the capitals of an
    acronym joined (S.H.I.E.L.D.), nothing dangling at either end."""
    if not raw:
        return None
    raw = raw.strip(_TITLE_EDGES)
    if not raw:
        return None
    if " " not in raw or "_" in raw:
        raw = raw.replace(".", " ").replace("_", " ")
    words = raw.split()
    if min(map(len, words)) > 1:
        return " ".join(words).strip(_EDGE_JUNK) or None
    out: list[str] = []
    run: list[str] = []
    for word in words:
        if len(word) == 1 and word.isupper():
            run.append(word)
            continue
        if run:
            out.append(".".join(run) + "." if len(run) > 1 else run[0])
            run = []
        out.append(word)
    if run:
        out.append(".".join(run) + "." if len(run) > 1 else run[0])
    return " ".join(out) or None
