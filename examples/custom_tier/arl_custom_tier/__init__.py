"""Example ARL plugin: one extra verifier tier, discovered through an entry point."""

from arl_custom_tier.logp import CrippenLogPVerifier, LogPParams

__all__ = ["CrippenLogPVerifier", "LogPParams"]
