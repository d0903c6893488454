"""The web page in a real browser: Debian's chromium, headless, driven through chromedriver by
selenium, against the API as it runs in production (gunicorn, 2 workers, HTTPS with the
harness's self-signed certificate, which the browser trusts by its public key's hash only).

An operator logs in through the form, sees a group's progress, searches, and downloads a post's
NZB through its link (the file the browser saved is read by the `nzb` package and lists the
original post's articles); an API-key user gets the search and not the status; an API key in
the URL works without a login. Screenshots of the pages are checked as PNG files of the window's
size with something drawn."""

from __future__ import annotations

import base64
import hashlib
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest
from nzb import Nzb
from selenium import webdriver
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from sqlalchemy import text

from app.db import session_scope
from app.services import apikeys, operators
from tests.app.test_nzb_export import posted_real_posts
from tests.fixtures.waiting import wait_until

NZB_DIR = Path(__file__).resolve().parents[1] / "data" / "nzb"
WALKING_DEAD_NZB = NZB_DIR / "avsnatch_teevee_walking_dead_s03e06.nzb"
WALKING_DEAD = "The.Walking.Dead.S03E06.INTERNAL.720p.HDTV.x264-EVOLVE"
WIDTH, HEIGHT = 1400, 1000
# The page's Log out: a button posting the session's CSRF token (a GET does not log out).
LOG_OUT = (By.CSS_SELECTOR, "header form.logout button")


def spki_hash(certificate: str) -> str:
    """The base64 SHA-256 of the certificate's public key (SubjectPublicKeyInfo, DER), as
    chromium's --ignore-certificate-errors-spki-list takes it."""
    public_key = subprocess.run(
        ["openssl", "x509", "-in", certificate, "-pubkey", "-noout"], check=True, capture_output=True
    ).stdout
    der = subprocess.run(
        ["openssl", "pkey", "-pubin", "-outform", "der"], input=public_key, check=True, capture_output=True
    ).stdout
    return base64.b64encode(hashlib.sha256(der).digest()).decode()


def program(name: str) -> str:
    found = shutil.which(name)
    assert found, f"{name} is not installed: ops/setup installs Debian's chromium and chromium-driver"
    return found


@pytest.fixture
def browser(api_server, tmp_path):
    """Headless chromium trusting the API's certificate (and no other bad one), saving
    downloads to tmp_path/downloads."""
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    options = webdriver.ChromeOptions()
    options.binary_location = program("chromium")
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        f"--window-size={WIDTH},{HEIGHT}",
        "--hide-scrollbars",
        f"--user-data-dir={tmp_path / 'profile'}",
        f"--ignore-certificate-errors-spki-list={spki_hash(api_server.cafile)}",
    ):
        options.add_argument(argument)
    options.add_experimental_option(
        "prefs", {"download.default_directory": str(downloads), "download.prompt_for_download": False}
    )
    driver = webdriver.Chrome(options=options, service=Service(program("chromedriver")))
    try:
        driver.set_page_load_timeout(60)
        driver.execute_cdp_cmd("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads)})
        driver.downloads = downloads
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def catalog(clean_db):
    """The Walking Dead post (crossposted to two groups) stored the normal way; an operator key
    and an API key: (operator key, API key)."""
    posted_real_posts([WALKING_DEAD_NZB])
    with session_scope() as s:
        operator = operators.create_key(s, "alice")[1]
        api_key = apikeys.create_key(s, "reader")[1]
    return operator, api_key


def on_page(driver, path: str, element_id: str) -> None:
    """Waits for the browser to show path (its query aside) with the element of this id."""

    def shown() -> bool:
        try:
            return driver.current_url.split("?")[0].endswith(path) and bool(driver.find_elements(By.ID, element_id))
        except WebDriverException:  # the page changing under the look
            return False

    wait_until(shown, timeout=30, what=lambda: f"{path} with #{element_id}; the browser is at {driver.current_url}")


def log_in(driver, key: str) -> None:
    field = driver.find_element(By.NAME, "key")
    field.clear()
    field.send_keys(key)
    driver.find_element(By.CSS_SELECTOR, "form#login button[type=submit]").click()


def check_screenshot(driver, path: Path) -> None:
    """A screenshot of the page as a PNG: the size of the window's viewport, and not one flat
    colour (a page drawn with text and tables)."""
    viewport = driver.execute_script(
        "return [window.innerWidth * devicePixelRatio, window.innerHeight * devicePixelRatio]"
    )
    assert driver.save_screenshot(str(path))
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    assert [width, height] == [round(v) for v in viewport] and width == WIDTH and height > HEIGHT // 2
    assert len(data) > 10_000, len(data)
    pixels = bytearray()
    position = 8
    while position < len(data):
        length, kind = struct.unpack(">I4s", data[position : position + 8])
        if kind == b"IDAT":
            pixels += data[position + 8 : position + 8 + length]
        position += 12 + length
    rows = zlib.decompress(bytes(pixels))
    assert len(set(rows)) > 16  # many different byte values: drawn, not blank


def check_stored_chart(driver) -> None:
    """The chart of articles stored a minute, as the browser draws it: a line of its own colour for
    each group the post was stored in, rising above the axis at the minute it was stored, and a
    legend giving each group's articles (those its catalog holds)."""
    chart = driver.find_element(By.ID, "stored-chart")
    assert chart.is_displayed() and chart.size["width"] > WIDTH // 2, chart.size
    lines = {
        line.get_attribute("data-group"): line
        for line in chart.find_elements(By.CSS_SELECTOR, "svg polyline[data-group]")
    }
    with session_scope() as s:
        stored = dict(
            s.execute(
                text("SELECT g.name, count(*) FROM fragments f JOIN groups g ON g.id = f.group_id GROUP BY g.name")
            ).all()
        )
    assert set(lines) == set(stored) == {"alt.binaries.multimedia", "alt.binaries.teevee"}
    colours = set()
    for group, line in lines.items():
        width, height = driver.execute_script("const b = arguments[0].getBBox(); return [b.width, b.height];", line)
        assert width > 0 and height > 0, (group, width, height)  # a line across the hours, with a peak
        colours.add(driver.execute_script("return getComputedStyle(arguments[0]).stroke;", line))
        legend = chart.find_element(By.CSS_SELECTOR, f'figcaption .legend[data-group="{group}"]')
        assert legend.is_displayed() and f"{group}: {stored[group]:,} articles" in legend.text, legend.text
    assert len(colours) == len(lines)


def segment_ids(nzb: Nzb) -> set[str]:
    return {segment.message_id for file in nzb.files for segment in file.segments}


def test_an_operator_logs_in_sees_the_progress_searches_and_downloads_an_nzb(api_server, browser, catalog, tmp_path):
    operator_key, _ = catalog
    url = api_server.url
    browser.get(f"{url}/")
    on_page(browser, "/login", "login")  # the status asks for a login first

    log_in(browser, "seedop_not-a-key")
    on_page(browser, "/login", "login-error")
    assert "not an operator key" in browser.find_element(By.ID, "login-error").text

    log_in(browser, operator_key)
    on_page(browser, "/", "groups")
    row = browser.find_element(By.CSS_SELECTOR, 'tr[data-group="alt.binaries.teevee"]')
    # Every article number of the post's groups was read: 100 %, nothing left.
    assert row.find_element(By.CSS_SELECTOR, ".percent").text == "100.0 %"
    assert row.find_element(By.CSS_SELECTOR, ".eta").text == "nothing left"
    assert browser.find_element(By.CSS_SELECTOR, 'tr[data-node="edge-1"]')
    check_stored_chart(browser)
    check_screenshot(browser, tmp_path / "status.png")

    browser.find_element(By.LINK_TEXT, "Search").click()
    on_page(browser, "/search", "search")
    box = browser.find_element(By.NAME, "q")
    box.send_keys("walking dead s03e06")
    box.submit()
    on_page(browser, "/search", "results")
    assert browser.find_element(By.ID, "total").text == "2 posts found"
    names = [
        cell.text.split("\n")[0] for cell in browser.find_elements(By.CSS_SELECTOR, "#results td.name:first-child")
    ]
    assert names == [WALKING_DEAD, WALKING_DEAD]
    check_screenshot(browser, tmp_path / "search.png")

    browser.find_elements(By.CSS_SELECTOR, "a.nzb")[0].click()
    saved = browser.downloads / f"{WALKING_DEAD}.nzb"
    wait_until(
        lambda: saved.exists() and not list(browser.downloads.glob("*.crdownload")),
        timeout=30,
        what=lambda: f"the NZB saved; the download folder holds {sorted(browser.downloads.iterdir())}",
    )
    downloaded = Nzb.from_file(saved)
    assert segment_ids(downloaded) == segment_ids(Nzb.from_file(WALKING_DEAD_NZB))

    browser.find_element(*LOG_OUT).click()
    on_page(browser, "/login", "login")
    browser.get(f"{url}/")
    on_page(browser, "/login", "login")


def test_an_api_key_searches_but_does_not_see_the_status(api_server, browser, catalog, tmp_path):
    _, api_key = catalog
    url = api_server.url
    browser.get(f"{url}/login")
    on_page(browser, "/login", "login")
    log_in(browser, api_key)
    on_page(browser, "/search", "search")
    assert not browser.find_elements(By.LINK_TEXT, "Status")
    browser.get(f"{url}/")
    on_page(browser, "/", "message")
    assert "operators" in browser.find_element(By.ID, "message").text
    browser.find_element(*LOG_OUT).click()
    on_page(browser, "/login", "login")

    # A link with the key in it, as a user bookmarks one: no login, and the NZB links carry it.
    browser.get(f"{url}/search?q=walking+dead&apikey={api_key}")
    on_page(browser, "/search", "results")
    links = [a.get_attribute("href") for a in browser.find_elements(By.CSS_SELECTOR, "a.nzb")]
    assert len(links) == 2 and all(f"apikey={api_key}" in link for link in links)
    assert not browser.find_elements(*LOG_OUT)
    check_screenshot(browser, tmp_path / "search-by-key.png")
