"""The dashboard's HTML: runs listed, trend SVG, run page, compare view; and a real browser."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest

from tests.service.conftest import Server, create, finished, wait_for

ASSET = re.compile(r"""(?:src|href|action)=["']([^"']+)["']""")


@pytest.fixture(scope="module")
def two_runs(shared_server: Server) -> tuple[str, str]:
    admin = shared_server.client(shared_server.keys.admin)
    first = create(admin, config="slow", variant="base", limit=12)
    wait_for(admin, first["id"], finished)
    second = create(admin, config="slow", variant="faster", limit=12)
    wait_for(admin, second["id"], finished)
    return str(first["id"]), str(second["id"])


def _logged_in(server: Server, key: str) -> httpx.Client:
    client = httpx.Client(base_url=server.url, timeout=30)
    response = client.post("/login", data={"key": key, "next": "/"})
    assert response.status_code == 303 and response.headers["location"] == "/"
    cookie = response.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie
    assert key not in cookie  # a session token, never the key
    return client


def _no_external_assets(page: str) -> None:
    for target in ASSET.findall(page):
        assert target.startswith(("/", "#")), target
    assert "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "https://" not in page


def test_pages_need_a_login(shared_server: Server) -> None:
    response = httpx.get(f"{shared_server.url}/trends", follow_redirects=False)
    assert response.status_code == 303
    assert response.headers["location"] == "/login?next=%2Ftrends"
    bad = httpx.post(f"{shared_server.url}/login", data={"key": "rgv_nope"})
    assert bad.status_code == 401 and "not valid" in bad.text


def test_runs_list_trends_run_page_and_compare(shared_server: Server,
                                               two_runs: tuple[str, str]) -> None:
    client = _logged_in(shared_server, shared_server.keys.viewer)
    first, second = two_runs
    home = client.get("/")
    assert home.status_code == 200
    assert first in home.text and second in home.text
    assert home.text.index(second) < home.text.index(first)  # newest first
    assert 'class="badge s2"' in home.text and 'data-task="' in home.text
    assert "Content-Security-Policy" in home.headers
    _no_external_assets(home.text)

    trends = client.get("/trends").text
    assert 'data-series="multi/slow"' in trends
    assert trends.count("<svg") >= 12 and "<polyline" in trends
    _no_external_assets(trends)

    run = client.get(f"/runs/{second}").text
    assert f'src="/runs/{second}/report.html"' in run and "rougel" in run
    assert "compare with the previous run" in run
    # The report's own script may run (its table sorts and filters), sandboxed in an
    # origin of its own: no allow-same-origin in the frame, nothing but its script by hash.
    assert '<iframe title="HTML report" sandbox="allow-scripts" ' in run
    assert "allow-same-origin" not in run
    report = client.get(f"/runs/{second}/report.html")
    assert report.status_code == 200 and "<svg" in report.text
    policy = report.headers["content-security-policy"]
    assert policy.endswith("sandbox allow-scripts") and "allow-same-origin" not in policy
    script_src = re.search(r"script-src ([^;]+);", policy)
    assert script_src is not None
    assert re.fullmatch(r"'sha256-[A-Za-z0-9+/]+=*'", script_src.group(1))  # one, no inline
    assert "connect-src" not in policy and "default-src 'none'" in policy

    compare = client.get("/compare", params={"a": first, "b": second}).text
    assert "12 shared questions" in compare
    assert compare.count("<tr") >= 13 and "ndcg10" in compare
    _no_external_assets(compare)

    other = _logged_in(shared_server, shared_server.keys.other)
    assert other.get(f"/runs/{second}").status_code == 404
    assert first not in other.get("/").text

    script = client.get("/assets/dashboard.js")
    assert script.status_code == 200 and "fetch(" in script.text
    client.post("/logout")
    assert client.get("/", follow_redirects=False).status_code == 303


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_dashboard_in_headless_chromium(shared_server: Server, two_runs: tuple[str, str],
                                        tmp_path: Path) -> None:
    """Log in with a login link, let the page's script run, and check the DOM it shows."""
    assert CHROMIUM is not None
    first, second = two_runs
    shots = Path(os.environ.get("RAGEV_SCREENSHOTS", tmp_path))
    shots.mkdir(parents=True, exist_ok=True)
    for name, target in (("runs", "/"), ("trends", "/trends"), ("run", f"/runs/{second}"),
                         ("report", f"/runs/{second}/report.html"),
                         ("compare", f"/compare?a={first}%26b={second}")):
        url = (f"{shared_server.url}/login?next={target}#key={shared_server.keys.viewer}")
        common = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                  "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--no-first-run", "--hide-scrollbars",
                  f"--user-data-dir={tmp_path / ('profile-' + name)}",
                  "--virtual-time-budget=8000", "--window-size=1280,900"]
        dom = subprocess.run([*common, "--dump-dom", url], capture_output=True, text=True,
                             timeout=90).stdout
        subprocess.run([*common, f"--screenshot={shots / (name + '.png')}", url],
                       capture_output=True, timeout=90)
        assert (shots / f"{name}.png").stat().st_size > 5000
        assert "Log in</h1>" not in dom, dom[:500]  # the login link worked
        if name == "runs":
            assert second in dom and 'class="badge s2"' in dom
        elif name == "trends":
            assert "<polyline" in dom
        elif name == "run":
            assert "report.html" in dom
        elif name == "report":
            # The report's script ran under the served policy: it marks the headers
            # sortable and counts the rows the filter shows.
            assert 'aria-sort="none"' in dom and re.search(r"\d+ of \d+ shown", dom), dom[-3000:]
        else:
            assert "shared questions" in dom
