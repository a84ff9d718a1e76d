"""Headless Chromium for the UI tests, and Airflow's login as a person does it."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from typing import Any

import pytest

from tests.airflow_stack import AirflowStack
from tests.conftest import ROOT

ARTIFACTS = ROOT / "test-artifacts"  # screenshots, kept after the run


def browser() -> Any:
    """Headless Chromium through chromedriver (Debian packages); skipped locally without them, failed in CI."""
    if not (shutil.which("chromium") and shutil.which("chromedriver")):
        if os.environ.get("CI"):
            pytest.fail("chromium and chromedriver are missing: .ci/setup installs them (apt-get)")
        pytest.skip("chromium / chromedriver not installed (apt-get install chromium chromium-driver)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or ""
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--window-size=1400,1000"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)


def login(driver: Any, stack: AirflowStack) -> None:
    """Through Airflow's own login form, as a person would."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    password = json.loads((stack.home / "simple_auth_manager_passwords.json.generated").read_text())["admin"]
    driver.get(stack.url + "/")
    wait = WebDriverWait(driver, 60)
    user_box = wait.until(while_navigating(ec.presence_of_element_located(
        (By.CSS_SELECTOR, "input[name='username']"))))
    user_box.send_keys("admin")
    driver.find_element(By.CSS_SELECTOR, "input[name='password']").send_keys(password)
    driver.find_element(By.CSS_SELECTOR, "button[type='submit']").click()
    wait.until(while_navigating(lambda d: d.get_cookie("_token") is not None))


def while_navigating(condition: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """`condition` for a page that may still be redirecting (the UI sends "/" on to its login page): a lookup
    that the navigation aborts counts as "not yet", not as a failure."""
    from selenium.common.exceptions import WebDriverException

    def check(driver: Any) -> Any:
        try:
            return condition(driver)
        except WebDriverException as err:
            if "aborted by navigation" in str(err) or "target navigated or closed" in str(err):
                return False
            raise

    return check


def open_trigger_form(driver: Any, stack: AirflowStack, dag_id: str) -> None:
    """The DAG's page, then its "Trigger" button: the form built from the DAG's Params."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(f"{stack.url}/dags/{dag_id}")
    wait = WebDriverWait(driver, 60)
    wait.until(while_navigating(ec.element_to_be_clickable(
        (By.CSS_SELECTOR, "button[aria-label='Trigger Dag']")))).click()
    wait.until(while_navigating(ec.presence_of_element_located((By.CSS_SELECTOR, "[name^='element_']"))))


def set_param(driver: Any, name: str, text: str) -> None:
    """Replace what the form's field for Param `name` holds with `text`, typed as a person would."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    field = driver.find_element(By.CSS_SELECTOR, f"[name='element_{name}']")
    field.send_keys(Keys.CONTROL, "a")
    field.send_keys(Keys.DELETE)
    if text:
        field.send_keys(text)
    field.send_keys(Keys.TAB)


def submit_trigger(driver: Any) -> None:
    """Press the form's "Trigger" button."""
    from selenium.webdriver.common.by import By

    button = [b for b in driver.find_elements(By.TAG_NAME, "button") if b.text.strip() == "Trigger"][-1]
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", button)
    # (a notice of the previous submission may still cover the button: press it as the page's own click would)
    driver.execute_script("arguments[0].click();", button)
