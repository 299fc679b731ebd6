"""Property-based fuzz suite: every public function and module, valid and hostile arguments.

``contract.py`` states the contract each call is held to; docs/architecture.md ("The fuzz
suite") says how to run the long profile.
"""
