"""The record and its one constructor: fields, rules, canonical form, hashes, derive()."""

# The tenant of a single-team install, and of every call that names none.
DEFAULT_TENANT = "default"
