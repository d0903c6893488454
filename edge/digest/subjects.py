"""Reading a Usenet binary subject: file name, segment counter, file counter and release name.

Posting styles seen in binary groups, all handled by the same steps:

    [01/12] - "Some.Release.part01.rar" yEnc (1/137)                      bracket counter, quoted name
    Some.Release [01/12] - "Some.Release.part01.rar" yEnc (1/137)         NZB style: name shown in front
    Name - File 3 of 12: "name.epub" yEnc (1/5)                           "i of N"
    (3/12) "name.r01" - 12,34 MB - yEnc (1/50)                            round counter, size
    [PRiVATE]-[WtFnZb]-[Name.S01E01.mkv]-[4/12] - "" yEnc 9786 (1/1366)   name in brackets, empty quotes
    [03/12] - 4f9a0c1d2e3b.part03.rar yEnc (1/50)                         unquoted (hash) name
    "Name.vol07+08.par2" yEnc (1/3)                                       no file counter
    Some text without counters

Steps: the segment counter is the *last* ``(p/P)``; the file name is the first non-empty quoted
string, else a bracketed or bare name with a known extension; the file counter is the first
``[i/N]``, else ``i of N``, else ``(i/N)`` left in the subject; the release is the text left
around the counters when it names the files (it contains their base name, as in NZB style) or when
the file names are obfuscated, else the file name without part/vol/extension suffixes.
"""

from __future__ import annotations

import re
from functools import partial
from typing import AnyStr, NamedTuple

from edge.digest.compiled import load

_compiled = load("edge.digest._overview")  # edge/digest/_overview.c: parse_pieces' shortcut in C, on ASCII text
_usual_subject = _compiled.usual_subject if _compiled is not None else None


class ParsedSubject(NamedTuple):
    filename: str | None
    part: int | None
    parts: int | None
    file_index: int | None
    file_count: int | None
    release: str


_parsed = partial(tuple.__new__, ParsedSubject)  # ParsedSubject((...)) without its Python __new__

_SEGMENT_COUNTER = re.compile(r"\(\s*(\d{1,9})\s*/\s*(\d{1,9})\s*\)")
_SEGMENT_COUNTER_BYTES = re.compile(_SEGMENT_COUNTER.pattern.encode())


def find_segment_counter(subject: AnyStr) -> tuple[int, int, int, int] | None:
    """(start, end, part, parts) of the segment counter, the last ``(p/P)`` of the subject with no
    quoted name after it: a ``(i/N)`` in front of the quoted name counts files, and posting tools
    put the segment counter after the name."""
    if isinstance(subject, bytes):
        pattern, opening, quote = _SEGMENT_COUNTER_BYTES, b"(", b'"'
    else:
        pattern, opening, quote = _SEGMENT_COUNTER, "(", '"'
    end = len(subject)
    while (start := subject.rfind(opening, 0, end)) >= 0:
        match = pattern.match(subject, start)
        if match:
            if quote in subject[match.end() :]:
                return None
            return start, match.end(), int(match[1]), int(match[2])
        end = start
    return None


# Extensions a posted file name ends with; used to find unquoted names and to cut suffixes.
_PLAIN_EXTENSIONS = frozenset(
    """
    rar 7z zip tar gz tgz bz2 xz lzh arj par2 par nfo sfv nzb srr srs md5 sha1 sha256 txt diz url log m3u cue
    iso img bin nrg mdf mds dmg vhd mkv avi mp4 m4v wmv mpg mpeg ts m2ts vob divx mov flv webm 3gp
    mp3 flac m4a m4b aac ogg opus wav ape wma ac3 dts mka epub pdf mobi azw3 azw lit djvu cbr cbz doc docx rtf
    chm fb2 jpg jpeg png gif bmp srt sub idx ass ssa exe scr com bat cmd msi pif vbs js jar apk lnk
    mpls bdmv clpi csv
""".split()
)
# Numbered volumes (.r00, .001, .z01, .p01) and, inside a name, .part01 and .vol03+04.
# Two digits (.10 ... .55) are split volumes too: obfuscating posting tools number a hash name so.
_NUMBERED_EXTENSION = re.compile(r"r\d{2,3}|s\d{2}|\d{2,3}|z\d{2}|p\d{2}", re.IGNORECASE)
_NUMBERED_FIRST = frozenset("0123456789rRsSzZpPvV")  # what those can start with
_NUMBERED_INNER_SUFFIX = re.compile(r"r\d{2,3}|s\d{2}|\d{2,3}|z\d{2}|p\d{2}|vol\d+[+-]\d+|part\d*", re.IGNORECASE)

# [i/N] - "name" yEnc, with maybe text in front: most subjects of binary groups. The text in
# front can only end at the space before the first quote or bracket: its repeat is possessive (it
# never gives back what it took, so a subject of another shape fails at once), its group ends
# with that space (cut off after the match).
_USUAL_SHAPE = re.compile(r'(?:([^"\[\]]*+)(?<= ))?(?:\[(\d{1,6})/(\d{1,6})\] - )?"([^"]+)" yEnc')
_DOUBLED_QUOTES = re.compile(r'""([^"]+)""')
_BRACKETED = re.compile(r"\[((?:[^\[\]]|\[[^\[\]]*\])+)\]")  # one level of brackets inside
_BRACKET_COUNTER = re.compile(r"\[\s*(\d{1,6})\s*/\s*(\d{1,6})\s*\]")
_OF_COUNTER = re.compile(r"\b(?:files?\s+)?(\d{1,6})\s+of\s+(\d{1,6})\b:?", re.IGNORECASE)
_ROUND_COUNTER = re.compile(r"\(\s*(\d{1,6})\s*/\s*(\d{1,6})\s*\)")
_REPLY_PREFIX = re.compile(r"^(?:(?:re|fwd?):\s*)+", re.IGNORECASE)
# What is left around the counters but names nothing: yEnc (and a byte count after it), sizes,
# uploader tags, N3wZ-style "\id\::" prefixes.
#
# _YENC, _SIZE and _SEPARATOR_RUN run on every text around the counters not cleaned yet
# (_CLEANED). Each is written to start with a character class, which the regex engine looks for in
# C, instead of trying the pattern at every position (\b, an optional group or IGNORECASE in front
# prevent that): \b before a word character is a look-behind after it, and IGNORECASE is spelled
# out, with the non-ASCII letters it also matches (KELVIN SIGN for k, dotted and dotless i, long
# s). They match what these plain forms match (tests/edge/test_subjects.py compares them):
#   _YENC            \byEnc\b(?:\s+\d+\b)?                          IGNORECASE
#   _SIZE            \b\d+(?:[.,]\d+)?\s*(?:[KMGT]i?B|bytes|B)\b     IGNORECASE
#   _SEPARATOR_RUN   (?: ?[-:|~]){2,} ?
_YENC = re.compile(r"[yY](?<!\w[yY])[eE][nN][cC]\b(?:\s+\d+\b)?")
_SIZE = re.compile(
    r"\d(?<!\w\d)\d*(?:[.,]\d+)?\s*"
    r"(?:[KMGTkmgt\u212a][iI\u0130\u0131]?[bB]|[bB][yY][tT][eE][sS\u017f]|[bB])\b"
)
_TAG = re.compile(r"\[\s*(?:PRiVATE|WtFnZb|FULL|REPOST|N3wZ|\d+|#[^\]]*)\s*\]", re.IGNORECASE)
_ID_PREFIX = re.compile(r"\S*\\::")
_SIZE_ONLY = re.compile(r"[\s\-]*(?:\d+(?:[.,]\d+)?\s*(?:[KMGT]i?B|bytes|B)?)?[\s\-]*", re.IGNORECASE)
_EMPTY_PAIRS = re.compile(r'\[\s*\]|\(\s*\)|\{\s*\}|""')
_SEPARATOR_RUN = re.compile(r"[ \-:|~](?:(?<= )[-:|~]|(?<! ))(?: ?[-:|~])+ ?")  # a space then a separator, or one
_EDGE_PUNCTUATION = " \t-:|~_.,;/\\<>"
_WORD = re.compile(r"\w")
_NOT_ALNUM = re.compile(r"[\W_]+")
_OBFUSCATED = re.compile(
    r"[0-9a-f]{16,}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|(?=\w*\d)[A-Za-z0-9]{12,}",
    re.IGNORECASE,
)


def parse_subject(subject: str) -> ParsedSubject:
    counter = find_segment_counter(subject)
    if counter is None:
        return parse_pieces(subject, "", None, None)
    start, end, part, parts = counter
    return parse_pieces(subject[:start], subject[end:], part, parts)


def parse_pieces(before: str, after: str, part: int | None, parts: int | None) -> ParsedSubject:
    """A subject already cut around its segment counter: the text before and after it."""
    text = before.strip()
    if ":" in text[:5]:
        text = _REPLY_PREFIX.sub("", text)
    if after and not _SIZE_ONLY.fullmatch(after):
        text = text + " " + after
    if _usual_subject is not None:
        found = _usual_subject(text, _CUT_SUFFIXES, _cuts)  # None: not ASCII, decided below
        if found:
            filename, file_index, file_count, stem = found
            if filename == filename.strip():  # else the steps strip it
                return _parsed((filename, part, parts, file_index, file_count, stem))
            return _parse_by_steps(text, part, parts)
        if found is False:
            return _parse_by_steps(text, part, parts)
    usual = text.endswith('" yEnc') and _USUAL_SHAPE.fullmatch(text)  # most other shapes: no regex run
    if usual:  # a shortcut giving what the steps give, for the most common shapes
        around, file_index, file_count, filename = usual.groups()
        if around is not None:
            around = around[:-1]  # its space
        stem = release_stem(filename)
        if (
            filename == filename.strip()
            and (file_index or not around)
            and (not around or "yEnc" not in around and around.strip(_EDGE_PUNCTUATION) in ("", stem))
        ):
            return _parsed(
                (filename, part, parts, file_index and int(file_index), file_count and int(file_count), stem)
            )
    return _parse_by_steps(text, part, parts)


def _parse_by_steps(text: str, part: int | None, parts: int | None) -> ParsedSubject:
    # [N]-[i/name]: the counter is read before the name is taken out of its bracket (what is
    # left of it, "[N]-", is a tag the release name leaves out).
    counted = _COUNT_THEN_INDEX.search(text) if "]-[" in text else None
    filename, text = _take_filename(text)
    file_index = file_count = None
    if counted:
        file_index, file_count = int(counted[2]), int(counted[1])
    elif match := _find_file_counter(text):
        file_index, file_count = int(match[1]), int(match[2])
        text = text[: match.start()] + " " + text[match.end() :]
    return _parsed((filename, part, parts, file_index, file_count, _release_name(filename, text)))


def file_subject(before: str, after: str) -> str:
    """The subject as its file shows it: the text around the segment counter."""
    before, after = before.strip(), after.strip()
    return f"{before} {after}" if before and after else before or after


def base_name(filename: str) -> str:
    """A file name without its part/vol/extension suffixes: ``X.part01.rar``, ``X.vol03+04.par2``,
    ``X.7z.001``, ``X.r00`` all give ``X``."""
    for _ in range(3):
        head, _, suffix = filename.rpartition(".")
        if not head:
            break
        cut = _CUT_SUFFIXES.get(suffix)
        if cut is None:
            cut = _cuts(suffix)
        if not cut:
            break
        filename = head
    return filename


# A name's last dot-suffix -> whether base_name cuts it. Suffixes repeat (rar, part01, exe...).
_CUT_SUFFIXES: dict[str, bool] = {}

# The text left around a subject's counters -> _clean_around of it. Every file of a release leaves
# the same text (e-book postings: "Author - Title (1911) [FR] - ... yEnc"), as do releases that
# differ only by name ("(1/3) "name.pdf" - 1,14 MB - yEnc"), so a look-up replaces a dozen regex
# passes. The cache is cleared when it holds more than its bound at a miss. An entry takes about
# 250 bytes, so the cache takes about 5 MB when full.
_CLEANED: dict[str, str] = {}
_CLEANED_MAX = 20_000


def clear_subject_caches() -> None:
    """Forget the suffixes and texts seen (see edge.digest.gather.clear_caches)."""
    _CUT_SUFFIXES.clear()
    _CLEANED.clear()


def _cuts(suffix: str) -> bool:
    if len(_CUT_SUFFIXES) > 20_000:
        _CUT_SUFFIXES.clear()
    cut = _CUT_SUFFIXES[suffix] = suffix.lower() in _PLAIN_EXTENSIONS or (
        suffix[:1] in _NUMBERED_FIRST and _NUMBERED_INNER_SUFFIX.fullmatch(suffix) is not None
    )
    return cut


def extension(filename: str) -> str:
    """The lower-cased extension when it is a known one (``rar``, ``r00``, ``exe``...), else ''."""
    _, dot, suffix = filename.rpartition(".")
    suffix = suffix.lower()
    if dot and (suffix in _PLAIN_EXTENSIONS or _NUMBERED_EXTENSION.fullmatch(suffix)):
        return suffix
    return ""


def _take_filename(text: str) -> tuple[str | None, str]:
    """The file name and the text without it: the first quoted name with a known extension, else
    a name in brackets, else a bare name with one (_bare_name), else the first quoted string,
    else an obfuscated token standing alone."""
    if "#34;" in text or "&quot;" in text:
        text = text.replace("&#34;", '"').replace("#34;", '"').replace("&quot;", '"')
    quoted = None
    if '"' in text:
        if '""' in text:
            text = _DOUBLED_QUOTES.sub(r'"\1"', text)
        # the quoted strings, in order: each runs from a quote to the next one
        start = text.find('"')
        while start >= 0:
            end = text.find('"', start + 1)
            if end < 0:
                break
            name = text[start + 1 : end].strip()
            if name:
                rest = text[:start] + " " + text[end + 1 :]
                if extension(name):
                    return name, rest
                quoted = quoted or (name, rest)
            start = text.find('"', end + 1)
    if "[" in text:
        if "]-[" in text:
            match = _COUNT_THEN_NAME.search(text)
            if match:  # [24]-[12/name]: the name after the file's number, whatever it ends with
                return match[1].strip(), text[: match.start()] + " " + text[match.end() :]
        for match in _BRACKETED.finditer(text):
            if extension(match[1]):
                name = match[1].rsplit("/", 1)[-1].rsplit("\\", 1)[-1].strip()
                return name, text[: match.start()] + " " + text[match.end() :]
    bare = _bare_name(_without_noise(text if quoted is None else quoted[1]))
    if bare:
        at = text.rfind(bare)
        return bare, (text[:at] + " " + text[at + len(bare) :]) if at >= 0 else text
    if quoted:
        return quoted
    alone = _without_noise(text).strip(_EDGE_PUNCTUATION)
    if alone and _OBFUSCATED.fullmatch(alone):  # "bdb28593ae0331ab0d1f5c039390b676 yEnc"
        return alone, text.replace(alone, " ", 1)
    return None, text


_COUNT_THEN_NAME = re.compile(r"\[\d{1,6}\]-\[\d{1,6}/([^\[\]]*[^\d\[\]][^\[\]]*)\]")
# Where a bare name can end: after a dot-suffix, before a space, a quote, a bracket or the end.
_NAME_END = re.compile(r"\.[\w+-]{1,12}(?=[\s\"\]),]|$)")
# What a bare name comes after: a file counter ([i/N], (i/N], <<i/N>>, i/N], "File i of N:", "i of
# N -"), a bracket closed before " - " ("[1971] - "), a request's or thanks' text up to its " - "
# ("REQ ... - ", "...-Thanks much - "). The name starts after the last one before its end.
_NAME_START = re.compile(
    r"[\[(<{]+\s*\d{1,5}\s*[/|_-]\s*\d{1,5}\s*[\])>}]*"
    r"|(?<![\w.,/-])\d{1,5}/\d{1,5}\]?"
    r"|\b(?:files?\s+)?\d{1,5}\s+of\s+\d{1,5}\b\s*:?"
    r"|\]\s+-\s"
    r"|^REQ\b.*?\s-\s"
    r"|\bthanks(?:\s+much)?\s+-\s",
    re.IGNORECASE,
)
_NAME_EDGE = " \t-:|~,;<>"


def _bare_name(text: str) -> str | None:
    """A name with a known extension written without quotes: it ends at its extension and starts
    after the last counter or request text before it (_NAME_START), else at the text's start;
    a dotted release name before " - " is not part of it ("Some.Release - name.rar")."""
    end = None
    for match in _NAME_END.finditer(text):
        suffix = match[0][1:]
        # .NN volumes are quoted where they are posted; bare, ".14" is a number ("3.14").
        if extension(text[: match.end()]) and not (len(suffix) < 3 and suffix.isdigit()):
            end = match.end()
    if end is None:
        return None
    start = 0
    for match in _NAME_START.finditer(text, 0, end):
        if match.end() < end:
            start = match.end()
    name = text[start:end].strip(_NAME_EDGE)
    head, dash, tail = name.rpartition(" - ")
    head = head.strip()
    if dash and " " not in head and "." in head and extension(tail):
        name = tail
    return name if name and extension(name) else None


def _find_file_counter(text: str) -> re.Match[str] | None:
    """The first [i/N], else "i of N", else (i/N), else the rarer shapes (_find_odd_counter)."""
    if "[" in text:
        match = _BRACKET_COUNTER.search(text)
        if match:
            return match
    if " of " in text or " OF " in text or " Of " in text:
        for match in _OF_COUNTER.finditer(text):
            if match[0][:1] in "Ff" or not _NOT_FILES.search(text, 0, match.start()):
                return match
    if "(" in text:
        match = _ROUND_COUNTER.search(text)
        if match:
            return match
    return _find_odd_counter(text)


# What "i of N" counts when these come just before it (Disc 5 of 5), rather than files.
_NOT_FILES = re.compile(
    r"\b(?:dis[ck]|cd|dvd|vol(?:ume)?|part|book|season|episode|chapter|tome|track)\s*$", re.IGNORECASE
)
# [N]-[i/name]: the PRiVATE/WtFnZb style with the file count in a bracket of its own.
_COUNT_THEN_INDEX = re.compile(r"\[(\d{1,6})\]-\[(\d{1,6})/(?!\d+\])")
# A counter in any brackets, or one bracket, or none: (02-17), (05|14), [2|2], [1_1], <<13/14>>,
# (00/24], COMPLEX(02/92], [3/3 name, German 01/43], " 04/63 ", "004/387" at the end. Bare or
# half-bracketed counters take a slash only (dashes write dates: 2013-07-07).
_ODD_COUNTERS = (
    re.compile(r"[\[(<{]\s*(\d{1,5})\s*[/|_-]\s*(\d{1,5})\s*[\])>}]"),
    re.compile(r"(?:(?<=[\[(])|(?<![\w.,/-]))(\d{1,5})/(\d{1,5})(?:\]|(?=\s)|$)"),
    re.compile(r"(\d{1,5})/(\d{1,5})\]"),
)


def _find_odd_counter(text: str) -> re.Match[str] | None:
    for pattern in _ODD_COUNTERS:
        for match in pattern.finditer(text):
            if int(match[1]) <= int(match[2]) and int(match[2]) > 0:
                return match
    return None


def _without_noise(text: str) -> str:
    text = _SIZE.sub(" ", _YENC.sub(" ", text))
    if "[" in text:
        text = _TAG.sub(" ", text)
    if "\\::" in text:
        text = _ID_PREFIX.sub(" ", text)
    return text


def _clean_around(text: str) -> str:
    cleaned = _CLEANED.get(text)
    if cleaned is None:
        if len(_CLEANED) > _CLEANED_MAX:
            _CLEANED.clear()
        cleaned = _CLEANED[text] = _cleaned(text)
    return cleaned


def _cleaned(text: str) -> str:
    text = " ".join(_without_noise(text).split())
    text = _SEPARATOR_RUN.sub(" - ", _EMPTY_PAIRS.sub(" ", text)).strip(_EDGE_PUNCTUATION)
    for opening, closing in ("[]", "()"):
        if text.startswith(opening) and text.endswith(closing) and text.count(opening) == 1:
            text = text[1:-1].strip()
    return text if _WORD.search(text) else ""


def _release_name(filename: str | None, text: str) -> str:
    """The text around the counters when it names the files, names a release (one dotted token,
    as a.b.teevee posts show it in brackets), or the names are obfuscated; else the file name's
    base. Around text that is just the base name needs no cleaning."""
    stem = release_stem(filename) if filename else ""
    quick = text.replace("yEnc", " ").strip(_EDGE_PUNCTUATION)
    if not quick or quick == stem:
        return stem
    around = _clean_around(text)
    if around and (not stem or _names_release(around, stem, filename)):
        return around
    return stem or around


def _names_release(around: str, stem: str, filename: str | None) -> bool:
    if stem.casefold() in around.casefold():
        return True
    if stem == filename and _OBFUSCATED.fullmatch(stem):  # a random name without extension
        return True
    if len(around) >= 10 and "." in around and " " not in around:  # Show.S01E01.720p.HDTV.x264-GROUP
        return True
    folded_stem, folded_around = _folded(stem), _folded(around)
    # The text names the files, or is the start of their names (a sample's "-sample" after it).
    return folded_stem in folded_around or (len(folded_around) >= 8 and folded_stem.startswith(folded_around))


# C1 control characters (U+0080 - U+009F) at the end of a name are never what a poster meant: a
# tool that mis-encoded a few files of a set leaves them after the set's name ("name\x95\x8c.part02.rar"
# beside "name.part01.rar"). Inside a name they are most often a UTF-8 name read as Latin-1 ("Ã\x89"
# for "É"), the same in every file of the set, so they stay.
_C1_CONTROLS = "".join(map(chr, range(0x80, 0xA0)))


def release_stem(filename: str) -> str:
    """The file name's base (base_name) as a release name, without stray C1 controls at its end."""
    stem = base_name(filename)
    if not stem.isascii():
        stem = stem.rstrip(_C1_CONTROLS) or stem
    return stem


def _folded(text: str) -> str:
    return _NOT_ALNUM.sub("", text).casefold()
