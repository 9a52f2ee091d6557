"""The web inspector at /ui (docs/server.md): the page over HTTP (no key needed, it holds no data;
its own script only), and the page driven in a real headless Chromium (Selenium with Debian's
chromium and chromium-driver) against a real uvicorn: a key and a scope typed in, a search, a
memory's provenance, history and timeline (with the fact it replaced), core blocks and the entity
graph; memory text that looks like markup stays text. It saves docs/img/inspector.png, the
README's picture (the clock is fixed, so the picture only changes when the page does)."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import struct
import threading
from collections.abc import Mapping
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import NoReturn

import httpx
import pytest

from dspy_memory import Memory
from dspy_memory.embed import HashEmbedder
from dspy_memory.server.app import create_app, running
from dspy_memory.testing import oracle_write_lm
from dspy_memory.types import Scope
from dspy_memory.util.timeutil import set_clock

SCREENSHOT = Path(__file__).resolve().parents[1] / "docs" / "img" / "inspector.png"
HOSTILE = "Ada's note: <script>alert(1)</script><img src=x onerror=\"window.pwned=1;document.title='pwned'\">"


def fact(content: str, predicate: str, obj: str, valid_at: str | None = None, **more: object) -> dict:
    found = {"content": content, "subject": "Ada", "predicate": predicate, "object": obj, **more}
    return found | ({"valid_at": valid_at} if valid_at else {})


# What Ada said, when, and the facts in it (the scripted write LM extracts exactly these).
SAID = [
    ("I live in Boston, near the river.", "2024-01-08T19:30:00Z",
     [fact("Ada lives in Boston.", "lives_in", "Boston", "2024-01-08")]),
    ("I work at Globex as a data engineer.", "2024-01-08T19:32:00Z",
     [fact("Ada works at Globex as a data engineer.", "works_at", "Globex", "2024-01-08")]),
    ("My cat Miso is three years old.", "2024-02-14T08:10:00Z",
     [fact("Ada has a cat named Miso.", "has_pet", "Miso", "2024-02-14")]),
    ("I moved to Denver last month.", "2024-06-03T18:05:00Z",
     [fact("Ada lives in Denver.", "lives_in", "Denver", "2024-05-01")]),
    ("Globex opened its Denver office in May.", "2024-06-03T18:07:00Z",
     [fact("Ada works at the Denver office of Globex.", "works_in", "Denver", "2024-05-01")]),
    ("Remember this note: " + HOSTILE, "2024-06-04T09:00:00Z",
     [fact(HOSTILE, "wrote_note", "<b>note</b>", "2024-06-04")]),
]  # fmt: skip
BROWSED_AT = datetime(2024, 6, 10, 12, 0, tzinfo=timezone.utc)


class SteppingClock:
    """A clock set by the test that moves 1 ms a reading: every run writes the same times."""

    def __init__(self) -> None:
        self.now, self.lock = BROWSED_AT, threading.Lock()

    def set(self, when: datetime) -> None:
        with self.lock:
            self.now = when

    def __call__(self) -> datetime:
        with self.lock:
            self.now += timedelta(milliseconds=1)
            return self.now


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    clock = SteppingClock()
    set_clock(clock)
    try:
        lm = oracle_write_lm({text: facts for text, _, facts in SAID})
        memory = Memory(tmp_path_factory.mktemp("ui") / "m.db", embedder=HashEmbedder(64), lm=lm)
        for text, at, _ in SAID:
            clock.set(datetime.fromisoformat(at.replace("Z", "+00:00")) + timedelta(minutes=1))
            memory.add([{"role": "user", "name": "Ada", "content": text}], user_id="ada", at=at)
        memory.blocks.set(
            "human", "Ada, data engineer at Globex; lives in Denver since May 2024.", user_id="ada"
        )
        memory.blocks.set("persona", "A careful assistant that keeps Ada's plans in order.", user_id="ada")
        admin = memory.store.keys.create(None, admin=True, name="inspector")[1]
        ada = memory.store.keys.create(Scope.of("ada"))[1]
        clock.set(BROWSED_AT)
        with running(create_app(memory=memory)) as url:
            yield {"url": url, "admin": admin, "ada": ada}
        memory.close()
    finally:
        set_clock(None)


def test_the_page_needs_no_key_and_runs_only_its_own_script(service):
    page = httpx.get(service["url"] + "/ui", timeout=10)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    for element in ("api-key", "user_id", "agent_id", "run_id", "open", "search-form", "query", "as-of",
                    "hits", "blocks", "detail", "graph-form", "entity", "graph"):  # fmt: skip
        assert f'id="{element}"' in page.text, element
    policy = page.headers["content-security-policy"]
    [nonce] = set(re.findall(r'nonce="([^"]+)"', page.text))
    assert f"script-src 'nonce-{nonce}'" in policy and "default-src 'none'" in policy
    assert "connect-src 'self'" in policy and "{{nonce}}" not in page.text
    assert nonce not in httpx.get(service["url"] + "/ui", timeout=10).text  # a new nonce each time
    # Nothing from elsewhere, and no HTML built from data: text goes in as text.
    assert not re.search(r"<(script|link|img)[^>]+(src|href)=", page.text)
    assert not re.search(r"innerHTML|outerHTML|insertAdjacentHTML|document\.write", page.text)
    # The page is open; the data behind it is not.
    refused = httpx.post(service["url"] + "/v1/search", json={"query": "Denver"}, timeout=10)
    assert refused.status_code == 401 and refused.json()["error"]["code"] == "unauthorized"


# -- in a browser --------------------------------------------------------------------------------

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
# Set by .ci/run: there a missing browser is a broken set-up, and a skip would pass for a green
# run of a test that never ran. A developer's machine without Chromium may still skip.
REQUIRE_BROWSER = "DSPY_MEMORY_REQUIRE_BROWSER"


def browser_missing(chromium: str | None, chromedriver: str | None, selenium: bool) -> str | None:
    """What the browser test lacks, and how to get it; None when nothing is missing."""
    missing = [
        name
        for name, there in (("chromium", chromium), ("chromedriver", chromedriver), ("selenium", selenium))
        if not there
    ]
    if not missing:
        return None
    fixes = []
    if not (chromium and chromedriver):
        fixes.append(
            "apt-get install --no-install-recommends chromium chromium-driver (bash scripts/test.sh "
            "does this as root with apt: ensure_browser in scripts/_venv.sh; see its output for why it could not)"
        )
    if not selenium:
        fixes.append("pip install -e '.[dev]' (selenium)")
    return f"the browser test needs {', '.join(missing)}, not found here: " + "; ".join(fixes)


def skip_or_fail(reason: str, environ: Mapping[str, str] = os.environ) -> NoReturn:
    if environ.get(REQUIRE_BROWSER, "") not in ("", "0"):
        pytest.fail(f"{reason} (${REQUIRE_BROWSER} is set, as in CI: this test must run, not skip)")
    pytest.skip(reason)


def decided(reason: str, environ: Mapping[str, str]) -> tuple[str, str]:
    """skip_or_fail's decision as a value: a skip raised inside the test would skip the test
    itself, and a broken decision would pass unseen."""
    try:
        skip_or_fail(reason, environ)
    except pytest.fail.Exception as failed:
        return "fail", str(failed)
    except pytest.skip.Exception as skipped:
        return "skip", skipped.msg
    return "neither", ""


def test_a_missing_browser_fails_where_ci_requires_it_and_skips_elsewhere():
    missing = browser_missing(None, "/usr/bin/chromedriver", True)
    assert missing is not None and missing.startswith("the browser test needs chromium, not found")
    assert "apt-get install --no-install-recommends chromium chromium-driver" in missing
    decision, message = decided(missing, {REQUIRE_BROWSER: "1"})
    assert decision == "fail" and f"${REQUIRE_BROWSER} is set" in message, (decision, message)
    for developer in ({}, {REQUIRE_BROWSER: ""}, {REQUIRE_BROWSER: "0"}):
        assert decided(missing, developer) == ("skip", missing)
    only_selenium = browser_missing("/usr/bin/chromium", "/usr/bin/chromedriver", False)
    assert only_selenium is not None and "selenium" in only_selenium and "apt-get" not in only_selenium
    assert browser_missing("/usr/bin/chromium", "/usr/bin/chromedriver", True) is None
    # CI sets the flag for the test command it runs.
    ci = [line.strip() for line in (Path(__file__).resolve().parents[1] / ".ci" / "run").open()]
    assert f"export {REQUIRE_BROWSER}=1" in ci, ci
    assert ci.index(f"export {REQUIRE_BROWSER}=1") < ci.index("exec bash scripts/test.sh"), ci


@pytest.fixture(scope="module")
def browser():
    missing = browser_missing(CHROMIUM, CHROMEDRIVER, importlib.util.find_spec("selenium") is not None)
    if missing:
        skip_or_fail(missing)
    from selenium import webdriver

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                     "--window-size=1280,900", "--hide-scrollbars", "--force-device-scale-factor=1"):  # fmt: skip
        options.add_argument(argument)
    driver = webdriver.Chrome(service=webdriver.ChromeService(executable_path=CHROMEDRIVER), options=options)
    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": False},
    )
    try:
        yield driver
    finally:
        driver.quit()


def test_the_inspector_in_a_browser(service, browser):
    from selenium.common.exceptions import NoAlertPresentException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as shows
    from selenium.webdriver.support.ui import WebDriverWait

    wait = WebDriverWait(browser, 10)

    def text_of(css: str) -> str:
        return browser.find_element(By.CSS_SELECTOR, css).text

    def search(query: str, first: str) -> None:
        box = browser.find_element(By.ID, "query")
        box.clear()
        box.send_keys(query)
        browser.find_element(By.CSS_SELECTOR, "#search-form button").click()
        wait.until(shows.text_to_be_present_in_element((By.ID, "status"), f'for "{query}"'))
        hit = next(
            h for h in browser.find_elements(By.CSS_SELECTOR, "#hits .hit") if h.text.startswith(first)
        )
        hit.click()
        shown(first)

    def shown(content: str) -> None:  # the memory, its timeline and its graph
        wait.until(shows.text_to_be_present_in_element((By.CSS_SELECTOR, "#detail .content"), content))
        wait.until(shows.text_to_be_present_in_element_attribute((By.ID, "detail"), "data-loaded", "true"))

    browser.get(service["url"] + "/ui")
    browser.find_element(By.ID, "api-key").send_keys(service["admin"])  # an admin key picks a scope
    browser.find_element(By.ID, "user_id").send_keys("ada")
    browser.find_element(By.ID, "open").click()
    wait.until(shows.text_to_be_present_in_element((By.ID, "blocks"), "persona"))
    assert "lives in Denver since May 2024" in text_of("#blocks") and "version 1" in text_of("#blocks")

    # Text that looks like markup is shown as text and never runs (in the list, detail, graph).
    search("note", "Ada's note:")
    assert HOSTILE in text_of("#hits") and text_of("#detail .content") == HOSTILE
    names = {
        node.get_attribute("data-name") for node in browser.find_elements(By.CSS_SELECTOR, "#graph .node")
    }
    assert "<b>note</b>" in names
    injected = (
        "return [document.querySelectorAll('img, b, main script').length, window.pwned, document.title]"
    )
    assert browser.execute_script(injected) == [0, None, "dspy-memory inspector"]
    with pytest.raises(NoAlertPresentException):
        browser.switch_to.alert.text  # noqa: B018 - reading it is the check

    # A memory that replaced another: its episode, its events, its timeline, its neighbourhood.
    search("Denver", "Ada lives in Denver.")
    detail = text_of("#detail")
    assert "valid 2024-05-01 → now" in detail and "learned 2024-06-03 18:06 → believed" in detail
    assert "I moved to Denver last month." in text_of("#detail .source")  # provenance
    assert "2024-06-03 18:05" in text_of("#detail .source")
    history = text_of("#detail table")  # the first table: the history
    assert "ADD" in history and "lm" in history and "changed" in history
    timeline = browser.find_elements(By.CSS_SELECTOR, "#detail table")[1]
    rows = timeline.find_elements(By.CSS_SELECTOR, "tr.link")
    assert [row.text.split("\n")[0] for row in rows] == [
        "2024-01-08 19:30 2024-05-01 Ada lives in Boston. superseded",
        "2024-05-01 now Ada lives in Denver. current",
    ]
    assert "past" in rows[0].get_attribute("class") and "selected" in rows[1].get_attribute("class")
    names = {
        node.get_attribute("data-name") for node in browser.find_elements(By.CSS_SELECTOR, "#graph .node")
    }
    assert {"Ada", "Boston", "Denver", "Globex", "Miso"} <= names
    assert "focus" in browser.find_element(By.CSS_SELECTOR, "#graph .node.focus").get_attribute("class")
    assert browser.find_element(By.CSS_SELECTOR, "#graph .node.focus").get_attribute("data-name") == "Ada"
    assert browser.find_elements(By.CSS_SELECTOR, "#graph line.edge.past")  # Boston, dashed
    assert "works_at" in text_of("#graph") and "lives_in" in text_of("#graph")

    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    assert browser.save_screenshot(str(SCREENSHOT))
    header = SCREENSHOT.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">II", header[16:24]) == (1280, 900)

    # The fact it replaced: no longer true since May, and the event that said so.
    rows[0].click()
    shown("Ada lives in Boston.")
    assert "valid 2024-01-08 19:30 → 2024-05-01" in text_of("#detail")
    assert "INVALIDATE" in text_of("#detail table"), text_of("#detail table")

    # A tenant key reaches its own scope without naming it, and nothing else.
    for field in ("api-key", "user_id"):
        browser.find_element(By.ID, field).clear()
    browser.find_element(By.ID, "api-key").send_keys(service["ada"])
    search("Denver", "Ada lives in Denver.")
    browser.find_element(By.ID, "user_id").send_keys("bob")
    browser.find_element(By.ID, "open").click()
    wait.until(shows.text_to_be_present_in_element((By.ID, "status"), "scope_denied"))
