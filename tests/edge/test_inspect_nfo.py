"""edge.inspect.nfo: an .nfo's text in CP437, UTF-8 or UTF-16, capped; the ids of IMDb, TVDB,
TVmaze and TMDB it links to; the release it names; the password sites it points at. Long hostile
lines cost time in proportion to their length."""

from __future__ import annotations

import time

from edge.inspect import nfo
from edge.inspect.nfo import decode_nfo, read_nfo

# An NFO as groups draw them: CP437 box drawing around the fields.
ART = (
    "╔══════════════════════════════════════════╗\r\n"
    "║  ▄▄▄  The Film (2019)                    ║\r\n"
    "╚══════════════════════════════════════════╝\r\n"
).encode("cp437")
FILM_NFO = ART + (
    b"  Release ..: The.Film.2019.1080p.BluRay.x264-GRP\r\n"
    b"  Source ...: Blu-ray\r\n"
    b"  IMDb .....: https://www.imdb.com/title/tt0111161/\r\n"
    b"  TMDB .....: https://www.themoviedb.org/movie/278-the-shawshank-redemption\r\n"
    b"  Greets to: Other.Group.Name-XYZ\r\n"
)


def test_a_cp437_nfo_reads_with_its_box_drawing_and_ids():
    found = read_nfo(FILM_NFO + b"\x1aSAUCE00 metadata of the editor")
    assert found.text.startswith("╔═══") and "▄▄▄" in found.text
    assert "\r" not in found.text and "SAUCE" not in found.text
    assert found.release_name == "The.Film.2019.1080p.BluRay.x264-GRP"
    assert (found.imdb, found.tmdb, found.tmdb_kind) == (111161, 278, "movie")
    assert (found.tvdb, found.tvmaze, found.password_urls) == (None, None, [])


def test_utf8_and_utf16_nfos_read_as_such():
    text = "Ünïcödé Über.Film.2020.German.DL.1080p.WEB.h264-GRÜP ☃\n"
    assert decode_nfo(text.encode("utf-8")) == text
    assert decode_nfo(b"\xef\xbb\xbf" + text.encode("utf-8")) == text
    assert decode_nfo(b"\xff\xfe" + text.encode("utf-16-le")) == text
    assert decode_nfo(b"\xfe\xff" + text.encode("utf-16-be")) == text


def test_the_text_is_capped_and_a_character_cut_at_the_cap_is_dropped():
    big = ("é" * 40_000).encode("utf-8")  # 80,000 bytes
    text = decode_nfo(big)
    assert nfo.MAX_NFO == 64 * 1024 and text == "é" * (nfo.MAX_NFO // 2)
    assert len(decode_nfo(b"\xdb" * 100_000)) == nfo.MAX_NFO  # CP437: a character a byte
    assert decode_nfo(b"a\0b\0") == "ab"


def test_tv_ids_in_their_usual_urls():
    text = (
        b"TVDB: http://thetvdb.com/?tab=series&id=79349&lid=7\n"
        b"http://www.tvmaze.com/shows/82/game-of-thrones\n"
        b"https://www.themoviedb.org/tv/1399-game-of-thrones\n"
        b"imdb: tt0944947\n"
    )
    found = read_nfo(text)
    assert (found.tvdb, found.tvmaze, found.tmdb, found.tmdb_kind, found.imdb) == (79349, 82, 1399, "tv", 944947)
    assert read_nfo(b"https://thetvdb.com/?tab=episode&seriesid=81189&id=349232").tvdb == 81189
    assert read_nfo(b"https://thetvdb.com/dereferrer/series/121361").tvdb == 121361
    assert read_nfo(b"https://thetvdb.com/?id=73739&tab=series").tvdb == 73739
    assert read_nfo(b"https://thetvdb.com/series/lost").tvdb is None  # a slug names no id


def test_imdb_urls_win_over_bare_numbers_and_ids_are_bounded():
    assert read_nfo(b"tt7654321 was the wrong one; imdb.com/title/tt1234567/").imdb == 1234567
    assert read_nfo(b"http://www.imdb.com/Title?0133093").imdb == 133093
    assert read_nfo(b"http://m.imdb.com/title/tt10872600/").imdb == 10872600
    assert read_nfo(b"att1234567 tt123456 tt123456789").imdb is None
    assert read_nfo(b"tvmaze.com/shows/0 themoviedb.org/movie/99999999999").tvmaze is None
    assert read_nfo(b"themoviedb.org/movie/99999999999").tmdb is None


def test_a_release_line_wins_over_other_dotted_names():
    text = b"Greets: Some.Other.Release.2019-XYZ\nRls: The.Show.S01E02.720p.HDTV.x264-KiLLERS\n"
    assert read_nfo(text).release_name == "The.Show.S01E02.720p.HDTV.x264-KiLLERS"
    assert read_nfo(b"The_Film_2019_DVDRip_XviD-GRP\n").release_name == "The_Film_2019_DVDRip_XviD-GRP"
    # not names: a file with its extension, a URL, a single dot
    assert read_nfo(b"the.film-grp.nfo http://x.org/The.Film.2019-GRP A.B-CD\n").release_name is None


def test_password_sites_are_the_urls_by_a_password_word():
    text = (
        b"IMDb: https://www.imdb.com/title/tt0111161/\n"
        b"Password: visit http://getpass.example.com now\n"
        b"Passwords at:\n"
        b"   www.unlock-it.example/r/123\n"
        b"Our site: https://www.group.example.org\n"
        b"http://password-site.example/x\n"
    )
    assert read_nfo(text).password_urls == [
        "http://getpass.example.com",
        "www.unlock-it.example/r/123",
        "http://password-site.example/x",
    ]
    many = b"".join(b"pw: http://p%d.example\n" % i for i in range(20))
    assert len(read_nfo(many).password_urls) == nfo.MAX_PASSWORD_URLS


def test_hostile_lines_cost_time_in_proportion():
    for line in (
        b"thetvdb.com/" * 5_000,
        b"(a.b" * 16_000,
        b"a.b-" * 16_000,
        b"www." * 16_000,
        b"pass: " + b"http://x" * 8_000,
        b"tt" + b"1" * 60_000,
        b"imdb.com/title/tt" * 3_500,
    ):
        started = time.perf_counter()
        read_nfo(line)
        assert time.perf_counter() - started < 2, line[:20]
