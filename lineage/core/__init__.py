"""The record and its one constructor: fields, rules, canonical form, hashes, derive()."""
