"""The documentation site renders with its theme and navigation: built strictly, opened in headless Chromium.

For the start page and the LiqoPeering reference page, a screenshot at a fixed window size must show the
Material header in the theme's colour (so the theme's stylesheet loaded) above a page that is not blank,
and the DOM Chromium ends with must hold the Material header and a navigation listing the site's sections.
Nothing is compared pixel by pixel: fonts differ between machines. The screenshots and DOMs are kept in
.local/site-render/ to look at. hack/install-chromium.sh installs Chromium (hack/test.sh runs it).
"""

from __future__ import annotations

import functools
import shutil
import subprocess
import threading
from collections.abc import Iterator
from html.parser import HTMLParser
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / ".local" / "site-render"
WINDOW = (1280, 900)
# The top-level sections of the site's navigation (mkdocs.yml), as a reader sees them.
SECTIONS = (
    "Home",
    "Getting started",
    "Reference",
    "Guides",
    "Operations",
    "Troubleshooting",
    "Liqo's behaviour",
    "Architecture",
    "Development",
    "Performance",
    "Reliability",
)
PAGES = {
    "home": ("index.html", "liqo-peering-operator"),
    "liqopeering": ("reference/liqopeering/index.html", "LiqoPeering"),
}
# Chromium as a one-shot renderer: no sandbox (the suite runs as root), nothing fetched in the background.
CHROMIUM_FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--hide-scrollbars",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-default-apps",
    "--disable-sync",
)


class NavTexts(HTMLParser):
    """The header's presence, the stylesheets, and the text of each navigation link or section label."""

    def __init__(self) -> None:
        super().__init__()
        self.header = False
        self.primary_nav = False
        self.stylesheets: list[str] = []
        self.links: list[str] = []
        self._open: list[str] = []  # tags of the link being read, innermost last
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        classes = (a.get("class") or "").split()
        if tag == "header" and "md-header" in classes:
            self.header = True
        if tag == "nav" and "md-nav--primary" in classes:
            self.primary_nav = True
        if tag == "link" and a.get("rel") == "stylesheet" and a.get("href"):
            self.stylesheets.append(str(a["href"]))
        if self._open:
            self._open.append(tag)
        elif "md-nav__link" in classes:
            self._open, self._text = [tag], []

    def handle_endtag(self, tag: str) -> None:
        if self._open and self._open[-1] == tag:
            self._open.pop()
            if not self._open:
                self.links.append(" ".join("".join(self._text).split()))

    def handle_data(self, data: str) -> None:
        if self._open:
            self._text.append(data)


def chromium(*args: str, profile: Path) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    assert binary, "Chromium is not installed: run hack/install-chromium.sh"
    return subprocess.run(
        [binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,  # only against a hung browser
    )


class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The site built strictly and served on loopback, as a web server would (search needs HTTP): its URL."""
    out = tmp_path_factory.mktemp("site")
    subprocess.run(
        [str(REPO / ".venv" / "bin" / "mkdocs"), "build", "--strict", "--site-dir", str(out)],
        cwd=REPO,
        check=True,
        capture_output=True,
        env={"PATH": "/usr/bin:/bin", "NO_MKDOCS_2_WARNING": "1"},
    )
    OUT.mkdir(parents=True, exist_ok=True)
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(QuietHandler, directory=str(out)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()
    thread.join()


def _bluish(image: Image.Image, x: int, y: int) -> bool:
    pixel = image.getpixel((x, y))
    assert isinstance(pixel, tuple)
    r, g, b = pixel[:3]
    return b > r + 40 and b > g + 40


@pytest.mark.parametrize("page", list(PAGES))
def test_page_renders_with_the_theme_header_and_content(site: str, page: str, tmp_path: Path) -> None:
    path, _ = PAGES[page]
    shot = OUT / f"{page}.png"
    shot.unlink(missing_ok=True)
    chromium(f"--window-size={WINDOW[0]},{WINDOW[1]}", f"--screenshot={shot}", site + path, profile=tmp_path)
    image = Image.open(shot).convert("RGB")
    assert image.size == WINDOW
    width, height = image.size
    # The header band: the theme's primary colour (indigo) across most of its width, which only the
    # theme's stylesheet paints.
    band = [_bluish(image, x, 8) for x in range(0, width, 8)]
    assert band.count(True) > 0.8 * len(band), f"no themed header in {shot}"
    # Below it: a page, not a blank or an error screen: a light background with text on it.
    body = image.crop((0, 60, width, height)).resize((width // 4, (height - 60) // 4))
    colours = body.getcolors(maxcolors=1 << 16) or []
    dark = sum(n for n, c in colours if isinstance(c, tuple) and sum(c) < 3 * 100)
    assert len(colours) > 20 and dark > 0, f"nothing rendered below the header in {shot}"


@pytest.mark.parametrize("page", list(PAGES))
def test_page_has_the_material_header_and_the_sites_navigation(site: str, page: str, tmp_path: Path) -> None:
    path, title = PAGES[page]
    dom = chromium("--dump-dom", site + path, profile=tmp_path).stdout
    (OUT / f"{page}.html").write_text(dom)
    parsed = NavTexts()
    parsed.feed(dom)
    assert parsed.header and parsed.primary_nav
    assert f"<title>{title}" in dom
    assert any("assets/stylesheets/main." in s for s in parsed.stylesheets), parsed.stylesheets
    missing = [s for s in SECTIONS if s not in parsed.links]
    assert not missing, f"the navigation lacks {missing}; it has {parsed.links}"
