"""The console's files as nginx and lighttpd serve them (both example
configurations): the page, its modules and xterm.js with their types, and
the headers that keep the page to its own scripts and its own origin."""

import re

import pytest

from conftest import REPO

CONSOLE = REPO / "build" / "console"
FILES = {
    "/console/": ("text/html", "index.html"),
    "/console/index.html": ("text/html", "index.html"),
    "/console/app.js": ("text/javascript", "app.js"),
    "/console/console.css": ("text/css", "console.css"),
    "/console/vendor/xterm.mjs": ("text/javascript", "vendor/xterm.mjs"),
    "/console/vendor/xterm.css": ("text/css", "vendor/xterm.css"),
    "/console/vendor/addon-fit.mjs": ("text/javascript", "vendor/addon-fit.mjs"),
    "/console/icon.svg": ("image/svg+xml", "icon.svg"),
}


@pytest.mark.parametrize("path", FILES)
def test_console_files_are_served_with_their_type_and_policy(client, path):
    ctype, name = FILES[path]
    r = client.get(path, auth=False, check_json=False)
    assert r.status == 200, (path, r.status, r.body[:200])
    assert r.body == (CONSOLE / name).read_bytes()
    assert r.header("content-type").split(";")[0].strip() == ctype, r.headers
    csp = r.header("content-security-policy") or ""
    directives = dict((d.split() + [""])[:2] for d in csp.split(";") if d.strip())
    assert directives.get("script-src") == "'self'", csp      # no inline script, nothing from elsewhere
    assert directives.get("connect-src") == "'self'", csp
    assert directives.get("default-src") == "'none'", csp
    assert directives.get("frame-ancestors") == "'none'", csp
    assert r.header("x-content-type-options") == "nosniff"


def test_the_page_has_no_inline_script(client):
    page = client.get("/console/", auth=False, check_json=False).body.decode()
    scripts = re.findall(r"<script\b([^>]*)>(.*?)</script>", page, re.S)
    assert scripts and all('src="' in attrs and not body.strip() for attrs, body in scripts), scripts
    assert not re.search(r"\son[a-z]+=", page), "inline event handler in index.html"


def test_the_api_beside_the_console_is_unchanged(client):
    assert client.get("/api/health", auth=False).status == 200
    r = client.get("/console/no-such-file.js", auth=False, check_json=False)
    assert r.status == 404
    assert client.get("/api/rooms", auth=False).status == 401
