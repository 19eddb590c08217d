"""Fixtures for the console suite: the integration suite's stacks, reused
(loaded under their own module name and re-exported, as tests/security/
does: see that folder's conftest.py for why a plain import does not work),
and a headless Chromium driven by Selenium: Debian's chromium,
chromium-driver and python3-selenium, nothing fetched.
"""

import importlib.util
import shutil
import sys
from pathlib import Path

import pytest

_INTEGRATION = Path(__file__).resolve().parents[1] / "integration" / "conftest.py"
_spec = importlib.util.spec_from_file_location("roombox_integration_conftest", _INTEGRATION)
_shared = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = _shared
_spec.loader.exec_module(_shared)
globals().update({k: v for k, v in vars(_shared).items() if not k.startswith("_")})

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
SHOTS = _shared.REPO / "build" / "console-shots"   # screenshots to look at, never committed


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    """One headless Chromium at 1440x900 for the module, downloads into a
    folder of its own (browser.download_dir)."""
    for tool, pkg in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")):
        assert shutil.which(tool), f"{tool} is missing: apt-get install {pkg} (tools/deps.sh)"
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    # --no-sandbox: the tests run as root, where Chromium's own sandbox will not start
    for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
              "--window-size=1440,900", "--force-device-scale-factor=1", "--lang=en-US"):
        opts.add_argument(a)
    downloads = tmp_path_factory.mktemp("downloads")
    opts.add_experimental_option("prefs", {
        "download.default_directory": str(downloads),
        "download.prompt_for_download": False,
    })
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=opts, service=Service(executable_path=CHROMEDRIVER))
    driver.download_dir = downloads
    # the page itself 1440x900 (the window size counts the browser's frame)
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": 1440, "height": 900, "deviceScaleFactor": 1, "mobile": False})
    # headless Chromium asks before a download unless told where to put it
    driver.execute_cdp_cmd("Page.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads)})
    try:
        yield driver
    finally:
        driver.quit()
