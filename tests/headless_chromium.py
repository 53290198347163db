"""Debian's Chromium, headless, for the tests that check a page in a real browser (skipped where it is absent:
`apt-get install chromium`)."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium is not installed "
                                                             "(Debian: apt-get install chromium)")


def chromium(page: Path, profile: Path, *options: str) -> str:
    """Open `page` in a fresh headless Chromium (its profile in `profile`) with `options`; its standard output."""
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}"]
    return subprocess.run([CHROMIUM, *flags, *options, page.as_uri()], capture_output=True, text=True, timeout=120,
                          check=True).stdout
