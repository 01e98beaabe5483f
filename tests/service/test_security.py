"""Hardened like the plugin (issue #29), against the real `ragev serve` process: redirects
only to the server's own paths (checked in Chromium), tenant isolation on every page,
ids that name no path outside the workspace, every string escaped, no model secret
anywhere, bounded JSON depth, one server per workspace."""

from __future__ import annotations

import base64
import html
import http.client
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest

from tests._remote_server import Reply, ScriptedServer, Seen, serve
from tests.service.conftest import Server, create, finished, logged_in, wait_for

pytestmark = pytest.mark.slow

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(CHROMIUM is None,
                                    reason="chromium is not installed (apt-get install chromium)")


@pytest.fixture
def elsewhere() -> Iterator[ScriptedServer]:
    """Another origin (another port of 127.0.0.1) with a page that says so."""
    for other in serve():
        other.default = lambda seen: Reply(200, b"<html><head><title>ELSEWHERE</title></head>"
                                                b"<body><h1>ELSEWHERE</h1></body></html>",
                                           {"Content-Type": "text/html"})
        yield other


def _chromium(url: str, profile: Path, shot: Path | None = None) -> str:
    """The DOM Chromium ends on after loading ``url`` and running its scripts."""
    assert CHROMIUM is not None
    common = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
              "--disable-background-networking", "--disable-component-update",
              "--disable-sync", f"--user-data-dir={profile}", "--virtual-time-budget=8000",
              "--window-size=1280,900"]
    if shot is not None:
        subprocess.run([*common, f"--screenshot={shot}", url], capture_output=True, timeout=90)
    return subprocess.run([*common, "--dump-dom", url], capture_output=True, text=True,
                          timeout=90).stdout


@needs_chromium
@pytest.mark.parametrize("trick", ["%5C", "%09/", "%5C%5C", "/%0A/"])
def test_a_login_link_never_leaves_the_server(shared_server: Server, elsewhere: ScriptedServer,
                                              tmp_path: Path, trick: str) -> None:
    """`/login?next=/\\host/x#key=...` (or a tab after the slash): browsers read it as
    `//host`; the page's script sends the browser to this server's runs list instead."""
    host = elsewhere.url.removeprefix("http://")
    url = f"{shared_server.url}/login?next=/{trick}{host}/x#key={shared_server.keys.viewer}"
    shots = Path(os.environ.get("RAGEV_SCREENSHOTS", tmp_path))
    shots.mkdir(parents=True, exist_ok=True)
    dom = _chromium(url, tmp_path / "profile", shots / f"redirect-{len(trick)}.png")
    assert "ELSEWHERE" not in dom and not elsewhere.seen, dom[:500]
    assert "<h1>Evaluation runs</h1>" in dom, dom[:500]  # logged in, on this server


@pytest.mark.parametrize("target", ["/\\evil.example/x", "/\t/evil.example/x",
                                    "/\n/evil.example", "//evil.example", "https://evil.example",
                                    "/ /evil.example"])
def test_the_login_form_redirects_only_to_own_paths(shared_server: Server, target: str) -> None:
    client = httpx.Client(base_url=shared_server.url, timeout=30)
    response = client.post("/login", data={"key": shared_server.keys.viewer, "next": target})
    assert response.status_code == 303 and response.headers["location"] == "/"
    form = client.get("/login", params={"next": target}).text
    assert '<input type="hidden" name="next" value="/">' in form
    kept = client.post("/login", data={"key": shared_server.keys.viewer,
                                       "next": "/trends?dataset_id=multi"})
    assert kept.headers["location"] == "/trends?dataset_id=multi"


def test_pages_and_endpoints_see_only_their_tenant(shared_server: Server) -> None:
    admin = shared_server.client(shared_server.keys.admin)
    runs = [create(admin, config="slow", variant="faster", limit=2)["id"] for _ in range(2)]
    for task_id in runs:
        assert wait_for(admin, task_id, finished)["task"]["status"] == 2
    own = logged_in(shared_server, shared_server.keys.viewer)
    assert own.get(f"/runs/{runs[0]}/report.html").status_code == 200
    assert own.get("/compare", params={"a": runs[0], "b": runs[1]}).status_code == 200
    stranger = logged_in(shared_server, shared_server.keys.other)  # tenant 2
    for path, params in ((f"/runs/{runs[0]}", {}), (f"/runs/{runs[0]}/report.html", {}),
                         ("/compare", {"a": runs[0], "b": runs[1]})):
        response = stranger.get(path, params=params)
        assert response.status_code == 404, path
        assert "slow" not in response.text and "faster" not in response.text
    for path in ("/", "/trends", "/?config=slow", "/trends?dataset_id=multi&config=slow"):
        page = stranger.get(path).text
        assert runs[0] not in page and 'data-series="multi' not in page, path
    other = shared_server.client(shared_server.keys.other)
    for method, path, kwargs in (
        ("GET", "/api/v1/evaluation", {"params": {"task_id": runs[0]}}),
        ("GET", "/api/v1/evaluation/samples", {"params": {"task_id": runs[0]}}),
        ("POST", "/api/v1/evaluation/cancel", {"json": {"task_id": runs[0]}}),
    ):
        assert other.request(method, path, **kwargs).status_code == 404, path
    listed = other.get("/api/v1/evaluations", params={"config": "slow"}).json()["data"]
    assert listed["total"] == 0


def _tree(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


@pytest.mark.parametrize(("field", "value"), [
    ("config", "../slow"), ("config", "slow/../slow"), ("knowledge_base_id", "/etc/passwd"),
    ("knowledge_base_id", "..\\slow"), ("dataset_id", "../data/multi"),
    ("dataset_id", "/tmp"), ("chat_id", "../../ragev-server"), ("embedding_id", "../x"),
    ("rerank_id", "/etc/passwd"), ("judge_id", "../ragev-server"),
    ("variant", "../../faster"),
])
def test_no_id_names_a_path_outside(shared_server: Server, field: str, value: str) -> None:
    before = _tree(shared_server.configs.parent)
    admin = shared_server.client(shared_server.keys.admin)
    body: dict[str, Any] = {field: value}
    if field == "variant":
        body["config"] = "slow"
    response = admin.post("/api/v1/evaluation", json=body)
    assert response.status_code == 400 and response.json()["error"]["details"]["field"] == field
    made = _tree(shared_server.configs.parent) - before
    assert all(p.startswith(("ws/", "ws" + os.sep)) for p in made), made


@pytest.mark.parametrize("task_id", ["..", "../ragev-server.db", "..%2Fragev-server.db",
                                     "%2E%2E", "evaluation_1_0_00_x/../../..", "/etc/passwd"])
def test_no_task_id_reads_a_file_outside(shared_server: Server, task_id: str) -> None:
    client = logged_in(shared_server, shared_server.keys.viewer)
    cookie = "; ".join(f"{name}={value}" for name, value in client.cookies.items())
    for path in (f"/runs/{task_id}", f"/runs/{task_id}/report.html"):
        # As sent, dot segments and all (httpx would resolve them before sending).
        connection = http.client.HTTPConnection("127.0.0.1", shared_server.port, timeout=30)
        connection.request("GET", path, headers={"Cookie": cookie})
        response = connection.getresponse()
        content = response.read()
        connection.close()
        assert response.status == 404, (path, response.status)
        assert b"SQLite format" not in content and b"[pytest]" not in content
    viewer = shared_server.client(shared_server.keys.viewer)
    for path in ("/api/v1/evaluation", "/api/v1/evaluation/samples"):
        response = viewer.get(path, params={"task_id": task_id})
        assert response.status_code == 404 and response.json()["success"] is False


#: A config whose name, pipeline and error message are HTML.
HOSTILE = '<img src=x onerror=alert(1)>"\'&amp;'


@needs_chromium
def test_every_string_is_escaped_in_the_browser(shared_server: Server, tmp_path: Path) -> None:
    """A config named like markup, whose task fails with an error quoting markup: the
    pages show the text, and the browser builds no element from it."""
    (shared_server.configs / f"{HOSTILE}.toml").write_text(
        '[dataset]\npath = "data/multi"\nid = "multi"\n\n'
        '[pipeline]\nname = "<script>document.title=\'pwned\'</script>"\n', encoding="utf-8")
    admin = shared_server.client(shared_server.keys.admin)
    task = create(admin, config=HOSTILE)
    data = wait_for(admin, task["id"], finished)
    assert data["task"]["status"] == 3 and "<script>" in data["task"]["err_msg"]
    shots = Path(os.environ.get("RAGEV_SCREENSHOTS", tmp_path))
    shots.mkdir(parents=True, exist_ok=True)
    for name, target in (("runs", "/"), ("run", f"/runs/{task['id']}"),
                         ("filtered", "/?" + urlencode({"config": HOSTILE}))):
        url = (f"{shared_server.url}/login?{urlencode({'next': target})}"
               f"#key={shared_server.keys.viewer}")
        dom = _chromium(url, tmp_path / f"profile-{name}", shots / f"escaped-{name}.png")
        assert "Log in</h1>" not in dom, dom[:300]
        body = dom[dom.index("<main>"):]
        assert "<img" not in body and "<script>document" not in body, name
        assert "pwned" not in re.search(r"<title>(.*?)</title>", dom).group(1)
        assert "&lt;img src=x onerror=alert(1)&gt;" in body, name
    run_page = logged_in(shared_server, shared_server.keys.viewer).get(f"/runs/{task['id']}").text
    assert html.escape(data["task"]["err_msg"]) in run_page


def _echo(seen: Seen) -> Reply:
    """A chat model that tells back every credential it was sent, whole and in parts."""
    if seen.method == "GET":
        return Reply(200, {"data": []})
    auth = seen.headers.get("Authorization", "")
    token = auth.partition(" ")[2]
    told = f"Authorization: {auth}; token {token}; X-Api-Key {seen.headers.get('X-Api-Key')}"
    if auth.startswith("Basic "):
        told += f"; {base64.b64decode(token).decode()}"
    return Reply(200, {"choices": [{"message": {"content": f"答案: {told}"}}]})


CANARIES = {"header": "sk-hdr-CANARY-51c0de", "x-key": "xk-CANARY-77aa01",
            "env": "sk-env-CANARY-9f8e7d"}


def test_no_model_secret_reaches_any_answer_page_log_or_file(
    make_server: Callable[..., Server], configs: Path, server: ScriptedServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`[pipeline.chat] extra_headers` with literal keys, a model table entry with
    `api_key_env`, and a model that echoes them: no key in any API answer, page, the
    server log, a task file, the database or the shared cache."""
    server.default = _echo
    (configs / "leaky.toml").write_text(
        '[dataset]\npath = "data/multi"\nid = "multi"\n\n[pipeline]\nname = "builtin"\n\n'
        f'[pipeline.chat]\nbase_url = "{server.url}/v1"\nmodel = "m"\n'
        f'extra_headers = {{ Authorization = "Bearer {CANARIES["header"]}", '
        f'X-Api-Key = "{CANARIES["x-key"]}" }}\n', encoding="utf-8")
    with open(configs / "ragev-server.toml", "a", encoding="utf-8") as table:
        table.write(f'\n[chat.keyed]\nbase_url = "{server.url}/v1"\nmodel = "m"\n'
                    'api_key_env = "RAGEV_TEST_CHAT_KEY"\n')
    monkeypatch.setenv("RAGEV_TEST_CHAT_KEY", CANARIES["env"])
    ragev = make_server()
    admin = ragev.client(ragev.keys.admin)
    tasks = [create(admin, config="leaky", limit=4),
             create(admin, config="leaky", chat_id="keyed", limit=4)]
    for task in tasks:
        assert wait_for(admin, task["id"], finished)["task"]["status"] == 2
    sent = " ".join(f"{s.headers.get('Authorization')} {s.headers.get('X-Api-Key')}"
                    for s in server.seen)
    assert all(canary in sent for canary in CANARIES.values())  # the keys were used

    answers: list[str] = []
    viewer = ragev.client(ragev.keys.viewer)
    for task in tasks:
        for path in ("/api/v1/evaluation", "/api/v1/evaluation/samples"):
            answers.append(viewer.get(path, params={"task_id": task["id"]}).text)
    answers += [viewer.get(p).text for p in ("/api/v1/evaluations", "/api/v1/configs",
                                             "/api/v1/datasets")]
    assert "答案: Authorization: ***" in answers[1]  # the echo arrived, scrubbed
    pages = logged_in(ragev, ragev.keys.viewer)
    for path in ("/", "/trends", f"/runs/{tasks[0]['id']}", f"/runs/{tasks[1]['id']}",
                 f"/runs/{tasks[0]['id']}/report.html", f"/runs/{tasks[1]['id']}/report.html",
                 f"/compare?a={tasks[0]['id']}&b={tasks[1]['id']}"):
        answers.append(pages.get(path).text)
    ragev.stop()
    answers.append(ragev.log())
    for text in answers:
        for canary in CANARIES.values():
            assert canary not in text
    for path in ragev.workspace.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            for canary in CANARIES.values():
                assert canary.encode() not in data, path
    assert not list(configs.rglob(".ragev-serve-*"))  # the task configs (in clear) are gone


def test_deeply_nested_json_is_refused_naming_the_body(shared_server: Server) -> None:
    admin = shared_server.client(shared_server.keys.admin)
    for body in (b"[" * 30_000 + b"]" * 30_000, b'{"variant": ' + b"[" * 40 + b"]" * 40 + b"}",
                 b'{"dataset_id": "' + b"[" * 100 + b'"}'):  # brackets inside a string: fine
        response = admin.post("/api/v1/evaluation", content=body,
                              headers={"Content-Type": "application/json"})
        assert response.status_code == 400, response.text
        error = response.json()["error"]
        if body.startswith(b'{"dataset_id"'):
            assert error["details"]["field"] == "dataset_id"  # an unknown name, not depth
            continue
        assert error["details"]["field"] == "body"
        assert re.fullmatch(r"body: JSON nested \d+ levels deep, more than 32; send a JSON "
                            r"object of the fields the endpoint takes", error["message"])
    assert httpx.get(f"{shared_server.url}/healthz").status_code == 200


def test_a_second_server_on_the_workspace_is_refused(
    make_server: Callable[..., Server],
) -> None:
    first = make_server()
    admin = first.client(first.keys.admin)
    task = create(admin, config="slow", variant="base")
    wait_for(admin, task["id"], lambda d: d["task"]["status"] == 1)
    second = make_server(workspace=first.workspace, start=False)
    with pytest.raises(RuntimeError, match="server exited"):
        second.start()
    assert second.process is not None and second.process.returncode == 2
    refusal = [line for line in second.log().splitlines() if "another ragev serve" in line]
    assert refusal == [
        f"ragev: error: --workspace {first.workspace}: another ragev serve (pid "
        f"{first.process.pid}, http://127.0.0.1:{first.port}/) uses this workspace; stop it, "
        "or pass another --workspace"], second.log()
    # The first server's evaluation was neither adopted nor stopped by the second.
    data = wait_for(admin, task["id"], finished)
    assert data["task"]["status"] == 2 and data["task"]["finished"] == 24, data["task"]
    assert "adopting" not in first.log() + second.log()
