"""The five real posts of tests/data/nzb/ on the e2e harness's INN 2, amid other traffic: what
tests/e2e/test_real_posts.py and test_newznab_https.py index (the `real_posts` fixture of
tests/e2e/conftest.py posts them once for the package)."""

from __future__ import annotations

import re
from pathlib import Path

from simnews.generator import Config, generate
from simnews.nzbpost import load_nzb, mixed_with, post_articles

NZB_DIR = Path(__file__).resolve().parents[1] / "data" / "nzb"
GROUP = "alt.binaries.realposts"
OTHER_TRAFFIC = 3_000
# What each post must be called: the name its subjects give it (in brackets, or its files' base
# name); an obfuscated post that names nothing keeps its hash.
NAMES = {
    "avsnatch_teevee_walking_dead_s03e06.nzb": "The.Walking.Dead.S03E06.INTERNAL.720p.HDTV.x264-EVOLVE",
    "nzbmatrix_teevee_underbelly_s05e04.nzb": "Underbelly.Badness.S05E04.Year.of.the.Rooster.PDTV.x264-FQM",
    "dlnzb_ngpost_economist.nzb": "The_Economist_USA_-_April_19_2025",
    "newsreap_ubuntu-16.04.1-server-i386.nzb": "b2d3075d94af88c6742b1fdfc34b225e",
    "sabnzbd_unicode_rar.nzb": "你好世界",
}
QUOTED = re.compile(r'"([^"]+)"')


def post_real_posts(inn) -> dict[str, dict]:
    """The five posts posted to GROUP, mixed into other traffic: per NZB, {message-id: (file name,
    segment number)} of what was posted."""
    inn.add_group(GROUP)
    posted = []
    truth: dict[str, dict] = {}
    for path in sorted(NZB_DIR.glob("*.nzb")):
        articles = post_articles(load_nzb(path), GROUP)
        truth[path.name] = {a.message_id: (QUOTED.search(a.truth.file_subject)[1], a.truth.segment) for a in articles}
        posted = mixed_with(posted, articles, seed=len(posted))
    other = list(generate(OTHER_TRAFFIC, Config(seed=24, groups=(GROUP,), namespace="real", kind="general")))
    everything = mixed_with(posted, [a for a in other if not a.lost], seed=24)
    assert inn.post(everything) == len(everything)
    assert set(truth) == set(NAMES)
    return truth
