"""Serve the built site/ on 127.0.0.1 and drive Debian's Chromium with Playwright."""

from __future__ import annotations

import ast
import functools
import gzip
import http.server
import shutil
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

ROOT = Path(__file__).parents[2]
SITE = ROOT / "site"
PREFIX = "/attnscale/"  # the path of site_url, so absolute links resolve as when deployed


def public_names() -> list[str]:
    """attnscale's public names, read from its ``__init__.py`` without importing it (this
    session has no torch): each ``from ._x import y as y``, and the lazily imported plot
    helpers in ``_PLOTTING``."""
    tree = ast.parse((ROOT / "src" / "attnscale" / "__init__.py").read_text())
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            names += [a.name for a in node.names if a.asname == a.name]
        elif isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "_PLOTTING":
            names += ast.literal_eval(node.value)
    assert names, "attnscale/__init__.py re-exports nothing"
    return sorted(set(names))


CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    # The browser's own background calls must never leave the machine.
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
]


# GitHub Pages compresses text with gzip; images and woff2 fonts are sent as they are.
COMPRESSED = {".html", ".css", ".js", ".json", ".svg", ".xml", ".txt"}


class _Handler(http.server.SimpleHTTPRequestHandler):
    def translate_path(self, path: str) -> str:
        parts = urlsplit(path)
        if not parts.path.startswith(PREFIX):
            return str(SITE / "__outside_the_site__")
        return super().translate_path("/" + parts.path[len(PREFIX) :])

    def do_GET(self) -> None:
        """Serve text gzip-compressed when the browser accepts it, as the published site does."""
        file = Path(self.translate_path(self.path))
        if file.is_dir():
            if not urlsplit(self.path).path.endswith("/"):
                super().do_GET()  # the redirect to the URL with a slash
                return
            file = file / "index.html"
            if not file.is_file():  # GitHub Pages answers 404, not a listing of the folder
                self.send_error(404, "a folder without index.html")
                return
        accepts_gzip = "gzip" in self.headers.get("Accept-Encoding", "")
        if not (accepts_gzip and file.suffix in COMPRESSED and file.is_file()):
            super().do_GET()
            return
        body = gzip.compress(file.read_bytes())
        self.send_response(200)
        self.send_header("Content-Type", self.guess_type(str(file)))
        self.send_header("Content-Encoding", "gzip")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:  # keep pytest output clean
        pass


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # the browser drops connections it no longer needs; that is not an error


@pytest.fixture(scope="session")
def base_url() -> Iterator[str]:
    if not (SITE / "index.html").exists():
        pytest.fail("site/ is not built: run `nox -s docs` first")
    handler = functools.partial(_Handler, directory=str(SITE))
    server = _Server(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}{PREFIX}"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as profile, sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            profile,
            executable_path=CHROMIUM,
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": 1280, "height": 900},
        )
        yield context
        context.close()


def site_pages() -> list[str]:
    """Every HTML page of the built site, as a path relative to the site root."""
    return sorted(p.relative_to(SITE).as_posix() for p in SITE.rglob("*.html"))
