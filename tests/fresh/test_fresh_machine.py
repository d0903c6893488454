"""The README's two commands on a fresh machine, for real.

A container from a bare Debian 12 (mmdebstrap's minbase with ca-certificates, git, python3,
python3-venv, sudo and procps; root; no compiler, no Python headers, no curl, no PostgreSQL) gets
the project under /root (mode 0700, as a clone there would be), and runs, as a newcomer would:

    ops/run --articles N     then     ops/test -m "not services"

Both must pass, and the API that ops/run started must report every compiled part built and
running. ops/run must also print the demo's t=tvsearch URL and say that the first result's NZB
downloaded whole from its INN (every article there, every CRC right): the demo serves what it
lists. Everything is installed by the project's own scripts from the package mirror and PyPI;
Debian's downloaded packages and pip's cache are kept on the host between runs (what a second
run on the same machine saves), never the installed result.

The container shares the host's network (the way podman runs here), so every port ops/run opens
is a free one chosen here, through the variables `ops/run --help` lists: below the kernel's
ephemeral range, since ops/test runs this test beside the rest of the suite, whose ports are
chosen by binding to port 0 while these wait for apt and pip. The packages' own
services do not start as they install (with no init system, invoke-rc.d blocks them): the
project runs private instances of its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import tarfile
from pathlib import Path

import pytest

from tests.fixtures.podman import LIMITS, PODMAN, REPO, base_image, remove_container
from tests.fixtures.ports import free_ports_below_ephemeral

pytestmark = [pytest.mark.services, pytest.mark.timeout(2700)]

# The bare machine: what the newcomer had, and nothing of the project's needs.
FRESH_PACKAGES = ("ca-certificates", "git", "python3", "python3-venv", "sudo", "procps")
ARTICLES = 4_000
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "usenet-seed" / "fresh-machine"
CLONE = "/root/usenet-seed"

# What the newcomer types, with the results written where the test reads them (/out).
SCRIPT = f"""
set -u
mkdir -p {CLONE} && tar -xf /in/project.tar -C {CLONE} && cd {CLONE}
git init -q && git add -A && git -c user.name=newcomer -c user.email=newcomer@localhost commit -qm clone
stat -c %a /root > /out/root.mode
ops/run --articles {ARTICLES} --days 3 > /out/run.log 2>&1
echo $? > /out/run.rc
python3 - > /out/healthz.json 2>/out/healthz.err <<'PY'
import os, ssl, urllib.request
context = ssl.create_default_context(cafile="var/tls/cert.pem")
url = f"https://127.0.0.1:{{os.environ['API_PORT']}}/healthz"
print(urllib.request.urlopen(url, context=context, timeout=10).read().decode())
PY
ops/run stop > /out/stop.log 2>&1
ops/test -m "not services" -q -p no:cacheprovider > /out/test.log 2>&1
echo $? > /out/test.rc
"""


def project_tarball(path: Path) -> None:
    """The project's files as a clone of this tree has them (tracked and not ignored), with their
    modes, from the working tree (committed inside, so that it is a clone's clean work tree)."""
    listed = (
        subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=REPO,
            check=True,
            capture_output=True,
        )
        .stdout.decode()
        .split("\0")
    )
    with tarfile.open(path, "w") as tar:
        for name in sorted(n for n in listed if n):
            if (REPO / name).is_file():
                tar.add(REPO / name, arcname=name, recursive=False)


# apt's and dpkg's progress, left out of what a failure shows.
APT_NOISE = (
    "Selecting ",
    "Preparing ",
    "Unpacking ",
    "Setting up ",
    "Processing triggers",
    "debconf:",
    "(Reading ",
    "Adding ",
    "Created symlink",
    "invoke-rc.d:",
    "update-alternatives:",
    "Creating config",
    "Done.",
)


def tail(path: Path, lines: int = 40) -> str:
    if not path.exists():
        return f"({path.name} missing)"
    kept = [line for line in path.read_text(errors="replace").splitlines() if not line.startswith(APT_NOISE)]
    return "\n".join(kept[-lines:])


def test_the_readme_commands_work_on_a_bare_debian_as_root_under_root(tmp_path):
    base = base_image(FRESH_PACKAGES, name="seed-fresh")
    inputs, out = tmp_path / "in", tmp_path / "out"
    inputs.mkdir()
    out.mkdir()
    project_tarball(inputs / "project.tar")
    for cache in ("apt", "pip"):
        (CACHE / cache).mkdir(parents=True, exist_ok=True)
    names = ("PG_PORT", "REDIS_PORT", "INN_READER_PORT", "INN_FEED_PORT", "INN_TLS_PORT", "API_PORT", "FLOWER_PORT")
    ports = dict(zip(names, map(str, free_ports_below_ephemeral(len(names))), strict=True))
    assert len(set(ports.values())) == len(ports)
    name = f"seed-fresh-{os.getpid()}"
    command = [
        *PODMAN,
        "run",
        "--rm",
        "--name",
        name,
        *LIMITS,
        "--network=host",
        "-v",
        f"{inputs}:/in:ro",
        "-v",
        f"{out}:/out",
        "-v",
        f"{CACHE / 'apt'}:/var/cache/apt/archives",
        "-v",
        f"{CACHE / 'pip'}:/root/.cache/pip",
    ]
    for key, value in ports.items():
        command += ["-e", f"{key}={value}"]
    try:
        subprocess.run([*command, base, "bash", "-c", SCRIPT], capture_output=True, text=True, timeout=2400)
    finally:
        remove_container(name)

    assert (out / "root.mode").read_text().strip() == "700"
    assert (out / "run.rc").exists() and (out / "run.rc").read_text().strip() == "0", (
        f"ops/run failed on a fresh machine:\n{tail(out / 'run.log')}"
    )
    run_log = (out / "run.log").read_text()
    assert "the catalog holds" in run_log and "the catalog holds 0 posts" not in run_log, tail(out / "run.log")
    # The demo's TV episode found as Sonarr searches, and its NZB's every article read back from
    # INN and checked by CRC (ops/run fails otherwise; the lines say what it checked).
    tvsearch = f"https://127.0.0.1:{ports['API_PORT']}/api?t=tvsearch&q=Demo+Show&season=1&ep=2&cat=5040&apikey="
    assert tvsearch in run_log, tail(out / "run.log")
    assert "the first result's NZB (Demo.Show.S01E02.720p.HDTV.x264-SEED): " in run_log, tail(out / "run.log")
    assert "every one on the server, CRCs right" in run_log, tail(out / "run.log")
    healthz = json.loads((out / "healthz.json").read_text() or "null") if (out / "healthz.json").exists() else None
    assert healthz is not None, tail(out / "healthz.err")
    # Every compiled part built and running: a missing header must stop the install, not leave
    # the Python twins running unnoticed.
    assert healthz["impl"] == "c" and healthz.get("compiled") and all(healthz["compiled"].values()), healthz
    assert (out / "test.rc").read_text().strip() == "0", f"ops/test -m 'not services' failed:\n{tail(out / 'test.log')}"
    summary = (out / "test.log").read_text().splitlines()[-1]
    assert " passed" in summary and "failed" not in summary and "error" not in summary, summary
