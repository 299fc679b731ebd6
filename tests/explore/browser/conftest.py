"""The explorer in headless Chromium: marked ``browser`` (``make check`` leaves them out)."""

from tests.folders import marks_below

pytest_collection_modifyitems = marks_below(__file__, "browser")
