"""The proof: a real downloader gets the files back.

A release of random files of known SHA-256 (three rar-like volumes and a par2 set made by
Debian's par2) is posted yEnc-encoded to INN 2 amid other traffic, indexed end to end (INN 2 ->
two edge nodes -> API -> Celery workers -> PostgreSQL), found through the newznab API over HTTPS
(the RSS read by feedparser), and its NZB, fetched through the item's enclosure (t=get), is
handed to NZBGet (Debian's nzbget 21, headless, on 127.0.0.1) reading INN's reader port. NZBGet
downloads, checks with par2 and writes the files; their SHA-256 equal the originals. A second
case leaves one article of a volume out of the NZB: NZBGet repairs the volume with par2. A third
posts a TV episode (Round.Trip.Show.S03E04.720p.HDTV.x264-SEED) in the same fill, finds it as
Sonarr does (t=tvsearch by title, season and episode in TV > HD, 5040), and downloads it so.

NZBGet is set up as the shared docs' recipe (`../shared/docs/nzbget.md`) has it: a config file per
run in a fresh directory, the control port on 127.0.0.1 with a random password, no web UI,
ParCheck=force, HealthCheck=none, Unpack=no.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import secrets
import shutil
import signal
import ssl
import subprocess
import tempfile
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import feedparser
import pytest

from simnews.generator import Article, Config, generate
from simnews.nzbpost import mixed_with
from simnews.ports import free_ports
from simnews.proxy import ProviderProxy
from simnews.yencpost import Release, make_release, post_files
from tests.e2e.conftest import DataCenter, News
from tests.fixtures.waiting import wait_until

pytestmark = pytest.mark.services

GROUP = "alt.binaries.roundtrip"
POSTER = "Roundtrip Poster <poster@roundtrip.example>"
PART_SIZE = 700_000
# 3 MB in three 1 MB volumes of two articles each (700,000 and 300,000 bytes). The par2 blocks
# are an eighth of an article; 30% of recovery (11 blocks) covers a lost 700,000-byte article
# (8 blocks) with room to spare.
RELEASE_SIZE = 3_000_000
VOLUMES = 3
REDUNDANCY = 30
OTHER_TRAFFIC = 1_500
NZB_NS = "http://www.newzbin.com/DTD/2003/nzb"
NZBGET = shutil.which("nzbget") or "/usr/bin/nzbget"
DOWNLOAD_TIMEOUT = 60  # seconds; a 4 MB job takes about 1 s on loopback
NEWZNAB_NS = "http://www.newznab.com/DTD/2010/feeds/attributes/"
# The TV episode: named as scene releases are, so that its name says the show, season 3, episode
# 4, 720p HDTV (TV > HD); two volumes of one article each, and a par2 set.
SHOW = "Round.Trip.Show.S03E04.720p.HDTV.x264-SEED"
SHOW_SIZE = 1_400_000
SHOW_VOLUMES = 2
TV_HD = 5040


@dataclass
class Posted:
    release: Release
    articles: list[Article]
    words: str  # the release's name as a user types it


@pytest.fixture(scope="module")
def fill(news: News, tmp_path_factory) -> dict[str, Posted]:
    """The releases on the server, the proof and the TV episode, spread through other traffic of
    their group: one fill for every case."""
    news.inn.add_group(GROUP)
    token = secrets.token_hex(4)  # a name and message-ids of this run only
    name = f"Roundtrip.Proof.{token}.2026"
    release = make_release(
        tmp_path_factory.mktemp("release"),
        name,
        seed=25,
        size=RELEASE_SIZE,
        volumes=VOLUMES,
        part_size=PART_SIZE,
        par2_redundancy=REDUNDANCY,
    )
    articles = post_files(release.files, GROUP, POSTER, namespace=token, part_size=PART_SIZE)
    # The episode keeps its scene name from run to run (a search by season and episode finds it
    # among the other posts by what its name says); its message-ids are this run's.
    show = make_release(
        tmp_path_factory.mktemp("show"), SHOW, seed=34, size=SHOW_SIZE, volumes=SHOW_VOLUMES, part_size=PART_SIZE
    )
    show_articles = post_files(show.files, GROUP, POSTER, namespace=f"{token}.show", part_size=PART_SIZE)
    other = [
        a
        for a in generate(
            OTHER_TRAFFIC, Config(seed=25, groups=(GROUP,), namespace=f"roundtrip.{token}", kind="general")
        )
        if not a.lost
    ]
    everything = mixed_with(show_articles, mixed_with(articles, other, seed=25), seed=34)
    assert news.inn.post(everything) == len(everything)
    return {
        "proof": Posted(release, articles, f"roundtrip proof {token} 2026"),
        "show": Posted(show, show_articles, "round trip show"),
    }


@pytest.fixture(scope="module")
def posted(fill: dict[str, Posted]) -> Posted:
    return fill["proof"]


@pytest.fixture(scope="module")
def show(fill: dict[str, Posted]) -> Posted:
    return fill["show"]


# -- the indexer, as a client of its newznab API -------------------------------------------------


def index_group(dc: DataCenter, news: News) -> None:
    """The group planned in ranges that cut the release, read by two edge nodes, stored."""
    dc.add_groups(GROUP)
    with ProviderProxy(news.inn.host, news.inn.reader_port) as proxy:
        dc.plan(proxy, GROUP, range_size=500)
        tokens = {name: dc.create_node(name) for name in ("edge-a", "edge-b")}
        nodes = [dc.edge(name, dc.node_env(token, proxy.port), "--exit-when-idle") for name, token in tokens.items()]
        for node in nodes:
            assert node.wait(120) == 0, node.log()
    dc.wait_finished()


def https_get(dc: DataCenter, url: str) -> tuple[str, bytes]:
    context = ssl.create_default_context(cafile=dc.api.cafile)
    with urllib.request.urlopen(url, context=context, timeout=30) as response:
        assert response.status == 200
        return response.headers.get_content_type(), response.read()


def nzb_through_newznab(
    dc: DataCenter, posted: Posted, search: dict[str, str | int] | None = None, category: int | None = None
) -> bytes:
    """Searches the release (by its name's words, or as `search` says), finds it the only item
    (in `category`, when given), and fetches the NZB its item's enclosure names."""
    key = json.loads(dc.flask("apikeys", "create", "nzbget", "--json"))["key"]
    query = urllib.parse.urlencode((search or {"t": "search", "q": posted.words}) | {"apikey": key})
    kind, body = https_get(dc, f"{dc.api.url}/api?{query}")
    feed = feedparser.parse(body)
    assert not feed.bozo, feed.bozo_exception
    assert [entry.title for entry in feed.entries] == [posted.release.name], body[:2000]
    if category is not None:
        # newznab states a post's parent category and its subcategory, each in a category attr.
        item = ET.fromstring(body).find("channel/item")
        categories = [a.get("value") for a in item.iter(f"{{{NEWZNAB_NS}}}attr") if a.get("name") == "category"]
        assert str(category) in categories, categories
    (enclosure,) = feed.entries[0].enclosures
    assert enclosure.type == "application/x-nzb"
    assert enclosure.href.startswith(f"{dc.api.url}/api?t=get&")
    kind, nzb = https_get(dc, enclosure.href)
    assert kind == "application/x-nzb"
    return nzb


def nzb_files(nzb: bytes) -> dict[str, ET.Element]:
    """The NZB's <file> elements by the file name quoted in their subject."""
    files = {}
    for element in ET.fromstring(nzb).iter(f"{{{NZB_NS}}}file"):
        files[element.get("subject").split('"')[1]] = element
    return files


def check_nzb(nzb: bytes, posted: Posted) -> None:
    """The NZB lists every posted file, in posting order, with every article by its message-id."""
    files = nzb_files(nzb)
    assert list(files) == [f.name for f in posted.release.files]
    listed = {
        (name, int(s.get("number"))): s.text
        for name, element in files.items()
        for s in element.iter(f"{{{NZB_NS}}}segment")
    }
    assert listed == {(a.truth.filename, a.truth.part): a.message_id.strip("<>") for a in posted.articles}


def without_segment(nzb: bytes, filename: str, number: int) -> bytes:
    """The NZB with one segment of one file left out."""
    ET.register_namespace("", NZB_NS)
    root = ET.fromstring(nzb)
    for element in root.iter(f"{{{NZB_NS}}}file"):
        if element.get("subject").split('"')[1] == filename:
            segments = element.find(f"{{{NZB_NS}}}segments")
            (segment,) = [s for s in segments if int(s.get("number")) == number]
            segments.remove(segment)
            return ET.tostring(root, encoding="utf-8", xml_declaration=True)
    raise AssertionError(f"{filename} is not in the NZB")


# -- NZBGet --------------------------------------------------------------------------------------


class NZBGet:
    """A headless NZBGet server (`nzbget -c CONF -s`) in a fresh directory, reading one news
    server, controlled over JSON-RPC on 127.0.0.1 with a random password."""

    def __init__(self, news_port: int):
        # A short path of its own: NZBGet's MainDir, config, queue, log and downloads.
        self.directory = Path(tempfile.mkdtemp(prefix="nzbget.", dir="/tmp"))
        (self.port,) = free_ports(1)
        self.password = secrets.token_hex(16)
        self.config = self.directory / "nzbget.conf"
        self.config.write_text(
            "\n".join(
                [
                    f"MainDir={self.directory}",
                    "DestDir=${MainDir}/dst",
                    "InterDir=${MainDir}/inter",
                    "NzbDir=${MainDir}/nzb",
                    "QueueDir=${MainDir}/queue",
                    "TempDir=${MainDir}/tmp",
                    "ScriptDir=${MainDir}/scripts",
                    "LockFile=${MainDir}/nzbget.lock",
                    "LogFile=${MainDir}/nzbget.log",
                    "WebDir=",
                    "ConfigTemplate=/usr/share/nzbget/webui/nzbget.conf",
                    "Server1.Active=yes",
                    "Server1.Name=inn",
                    "Server1.Level=0",
                    "Server1.Host=127.0.0.1",
                    f"Server1.Port={news_port}",
                    "Server1.Username=",
                    "Server1.Password=",
                    "Server1.Encryption=no",
                    "Server1.Connections=2",
                    "Server1.JoinGroup=no",
                    "ControlIP=127.0.0.1",
                    f"ControlPort={self.port}",
                    "ControlUsername=nzbget",
                    f"ControlPassword={self.password}",
                    "DaemonUsername=root",
                    "UMask=022",
                    "UpdateCheck=none",
                    "AppendCategoryDir=no",
                    "NzbDirInterval=0",
                    "DupeCheck=no",
                    "DiskSpace=0",
                    "ArticleRetries=0",
                    "ArticleInterval=1",
                    "ArticleTimeout=10",
                    "OutputMode=log",
                    "WriteLog=append",
                    "CrcCheck=yes",
                    "ParCheck=force",
                    "ParRepair=yes",
                    "ParScan=extended",
                    "HealthCheck=none",
                    "Unpack=no",
                ]
            )
            + "\n"
        )
        self.output = self.directory / "stdout.log"
        with open(self.output, "wb") as out:
            self.proc = subprocess.Popen(
                [NZBGET, "-c", str(self.config), "-s"],
                cwd=self.directory,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        auth = base64.b64encode(f"nzbget:{self.password}".encode()).decode()
        self._headers = {"Authorization": f"Basic {auth}", "Content-Type": "application/json"}

    def __enter__(self) -> NZBGet:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def log(self) -> str:
        return self.output.read_text(errors="replace")

    def rpc(self, method: str, *params):
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/jsonrpc",
            headers=self._headers,
            data=json.dumps({"method": method, "params": list(params)}).encode(),
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            answer = json.loads(response.read())
        assert answer.get("error") is None, answer
        return answer["result"]

    def _ready(self) -> bool:
        # NZBGet keeps running when it cannot bind its control port, and another one may hold
        # it: the answer counts only while this process lives and has bound the port.
        assert self.proc.poll() is None, f"nzbget exited ({self.proc.returncode}): {self.log()[-3000:]}"
        assert "Binding socket failed" not in self.log(), self.log()[-3000:]
        try:
            return bool(self.rpc("version"))
        except OSError:
            return False

    def wait_ready(self) -> None:
        wait_until(self._ready, 20, lambda: f"nzbget's control port; its output: {self.log()[-3000:]}")

    def append(self, name: str, nzb: bytes) -> int:
        nzb_id = self.rpc("append", name, base64.b64encode(nzb).decode(), "", 0, False, False, "", 0, "FORCE", [])
        assert nzb_id > 0, f"append refused: {self.log()[-3000:]}"
        return nzb_id

    def history_entry(self, nzb_id: int) -> dict | None:
        return next((e for e in self.rpc("history", False) if e["NZBID"] == nzb_id), None)

    def wait_done(self, nzb_id: int) -> dict:
        """The job's history entry: a job enters history once downloaded, par-checked and moved."""
        wait_until(
            lambda: self.history_entry(nzb_id) is not None,
            DOWNLOAD_TIMEOUT,
            lambda: f"nzbget's job {nzb_id} in history; its output: {self.log()[-3000:]}",
            interval=0.2,
        )
        return self.history_entry(nzb_id)

    def job_log(self, nzb_id: int) -> list[str]:
        return [f"{m['Kind']} {m['Text']}" for m in self.rpc("loadlog", nzb_id, 0, 10_000)]

    def stop(self) -> None:
        try:
            if self.proc.poll() is None:
                os.killpg(self.proc.pid, signal.SIGTERM)
                try:
                    self.proc.wait(15)
                except subprocess.TimeoutExpired:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                    self.proc.wait(15)
        finally:
            shutil.rmtree(self.directory, ignore_errors=True)


def download(nzb: bytes, name: str, news: News) -> tuple[dict, list[str], dict[str, str]]:
    """NZBGet's history entry, job log and the SHA-256 of each file it wrote, for one NZB."""
    with NZBGet(news.inn.reader_port) as nzbget:
        nzbget.wait_ready()
        nzb_id = nzbget.append(f"{name}.nzb", nzb)
        entry = nzbget.wait_done(nzb_id)
        messages = nzbget.job_log(nzb_id)
        destination = Path(entry["DestDir"])
        details = f"{entry['Status']}: {messages}"
        assert destination.parent == nzbget.directory / "dst", details
        written = {
            path.name: hashlib.sha256(path.read_bytes()).hexdigest() for path in destination.iterdir() if path.is_file()
        }
    return entry, messages, written


def check_success(entry: dict, messages: list[str]) -> None:
    details = f"{entry}\n" + "\n".join(messages)
    assert entry["Status"].startswith("SUCCESS"), details
    assert (entry["ParStatus"], entry["MoveStatus"]) == ("SUCCESS", "SUCCESS"), details


# -- the cases ----------------------------------------------------------------------------------


def test_nzbget_downloads_a_release_found_through_newznab_byte_for_byte(dc, news, posted):
    index_group(dc, news)
    nzb = nzb_through_newznab(dc, posted)
    check_nzb(nzb, posted)

    entry, messages, written = download(nzb, posted.release.name, news)

    check_success(entry, messages)
    assert entry["FailedArticles"] == 0 and entry["SuccessArticles"] == len(posted.articles), entry
    # NZBGet checked every volume against the par2 set (ParCheck=force) and found nothing to repair.
    log = "\n".join(messages)
    for volume in posted.release.volumes:
        assert f"INFO Verifying file {volume.name}" in messages, log
    assert "DETAIL Par: All files are correct, repair is not required." in messages, log
    assert f"INFO Repair not needed for {posted.release.name}/{posted.release.name}" in messages, log
    assert written == posted.release.sha256_by_name()


def test_nzbget_repairs_a_volume_whose_article_the_nzb_leaves_out(dc, news, posted):
    index_group(dc, news)
    nzb = nzb_through_newznab(dc, posted)
    volume = posted.release.volumes[1].name
    damaged = without_segment(nzb, volume, 1)  # the volume's first 700,000 bytes

    entry, messages, written = download(damaged, posted.release.name, news)

    check_success(entry, messages)
    assert entry["FailedArticles"] == 1, entry
    log = "\n".join(messages)
    # The left-out article is the volume's first 8 of 12 par2 blocks (87,500 bytes each).
    assert f"WARNING File {volume} has 8 bad block(s) of total 12 block(s)" in messages, log
    assert f"INFO Successfully repaired {posted.release.name}/{posted.release.name}" in messages, log
    assert written == posted.release.sha256_by_name()


def test_nzbget_downloads_a_tv_episode_found_by_tvsearch(dc, news, show):
    index_group(dc, news)
    nzb = nzb_through_newznab(
        dc, show, {"t": "tvsearch", "q": "Round Trip Show", "season": 3, "ep": 4, "cat": TV_HD}, category=TV_HD
    )
    check_nzb(nzb, show)

    entry, messages, written = download(nzb, show.release.name, news)

    check_success(entry, messages)
    assert entry["FailedArticles"] == 0 and entry["SuccessArticles"] == len(show.articles), entry
    log = "\n".join(messages)
    for volume in show.release.volumes:
        assert f"INFO Verifying file {volume.name}" in messages, log
    assert "DETAIL Par: All files are correct, repair is not required." in messages, log
    assert f"INFO Repair not needed for {show.release.name}/{show.release.name}" in messages, log
    assert written == show.release.sha256_by_name()
