#!/usr/bin/env python3
"""Open an HTML report in headless Chromium, check that it renders, and save a screenshot.

    python scripts/screenshot_report.py report.html [-o report.png] [--width 1400]
    python scripts/screenshot_report.py LOG --demo-faults -o report.png   # diagnose LOG first

Checks (printed as JSON; exit 1 when one fails): the page's own script finished, every chart
canvas holds non-blank pixels, and the browser console logged no error. Uses Chromium and
chromedriver from the system (Debian: `apt-get install chromium chromium-driver`) driven by
Selenium; nothing is downloaded.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

#: JS run in the page: for every canvas, whether it has a pixel that is not transparent/white
_PIXELS_JS = """
const out = [];
for (const c of document.querySelectorAll('canvas')) {
  let drawn = 0;
  try {
    const ctx = c.getContext('2d');
    const d = ctx.getImageData(0, 0, c.width, c.height).data;
    for (let i = 0; i < d.length; i += 4) {
      if (d[i + 3] > 0 && !(d[i] > 245 && d[i + 1] > 245 && d[i + 2] > 245)) drawn++;
    }
  } catch (e) { drawn = -1; }
  const box = c.closest('[data-signal]');
  out.push({signal: box ? box.dataset.signal : null, width: c.width, height: c.height, drawn: drawn});
}
return out;
"""


def find_browser() -> tuple[str, str] | None:
    """(chromium binary, chromedriver) from the system, or None."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    driver = shutil.which("chromedriver")
    if browser and driver:
        return browser, driver
    return None


def check_report(
    html_path: str | Path,
    png_path: str | Path | None = None,
    *,
    width: int = 1400,
    height: int = 1000,
    timeout: float = 20.0,
) -> dict[str, Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    found = find_browser()
    if found is None:
        raise RuntimeError("chromium and chromedriver not found (apt-get install chromium chromium-driver)")
    browser, driver_bin = found
    opts = webdriver.ChromeOptions()
    opts.binary_location = browser
    for a in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        f"--window-size={width},{height}",
        "--hide-scrollbars",
        "--force-device-scale-factor=1",
        "--allow-file-access-from-files",
    ):
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=driver_bin), options=opts)
    try:
        driver.get(Path(html_path).resolve().as_uri())
        deadline = time.time() + timeout
        ready = False
        while time.time() < deadline:
            ready = driver.execute_script("return document.documentElement.dataset.ldReady === '1'")
            if ready:
                break
            time.sleep(0.1)
        state = driver.execute_script("return window.__lossdoctor || null")
        canvases = driver.execute_script(_PIXELS_JS)
        logs = driver.get_log("browser")
        errors = [e["message"] for e in logs if e.get("level") in ("SEVERE", "ERROR")]
        cards = driver.execute_script("return document.querySelectorAll('.finding').length")
        text = driver.execute_script("return document.body.innerText")
        lang = driver.execute_script("return document.documentElement.lang")
        if png_path:
            full = driver.execute_script("return Math.max(document.body.scrollHeight, 600)")
            driver.set_window_size(width, min(int(full) + 40, 6000))
            time.sleep(0.3)
            driver.save_screenshot(str(png_path))
    finally:
        driver.quit()
    blank = [c for c in canvases if c["drawn"] <= 0 and c["width"] > 0]
    return {
        "ready": bool(ready),
        "state": state,
        "canvases": canvases,
        "blank_canvases": blank,
        "console_errors": errors,
        "finding_cards": cards,
        "text": text,
        "lang": lang,
        "ok": bool(ready) and not errors and bool(canvases) and not blank,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path", help="an HTML report, or a log to diagnose into one")
    ap.add_argument("-o", "--output", default="report.png", help="screenshot PNG (default report.png)")
    ap.add_argument("--width", type=int, default=1400)
    ap.add_argument("--lang", default="en")
    args = ap.parse_args(argv)
    path = Path(args.path)
    if path.suffix.lower() != ".html":
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
        from lossdoctor.detectors.engine import diagnose_runs
        from lossdoctor.report import render
        from lossdoctor.sources import load_path

        runs = load_path(path)
        html_path = Path(args.output).with_suffix(".html")
        html_path.write_text(render(diagnose_runs(runs), "html", runs=runs, lang=args.lang), encoding="utf-8")
        path = html_path
    result = check_report(path, args.output, width=args.width)
    summary = {k: v for k, v in result.items() if k != "canvases"}
    summary["canvases"] = len(result["canvases"])
    print(json.dumps(summary, indent=2, default=str))
    print(f"screenshot: {args.output}")
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
