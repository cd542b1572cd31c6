"""Importing this module registers every built-in verifier (filled in as tiers land)."""
