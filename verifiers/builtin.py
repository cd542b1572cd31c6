"""Importing this module registers every built-in verifier (via ``@register_verifier``)."""

import verifiers.chem  # noqa: F401  chemistry ladder
import verifiers.code  # noqa: F401  code suite
