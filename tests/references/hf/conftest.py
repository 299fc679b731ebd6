"""Comparisons with transformers' own functions and modules: marked ``compat`` too, so
``make test-compat`` runs them under the newest transformers release."""

from tests.folders import marks_below

pytest_collection_modifyitems = marks_below(__file__, "compat")
