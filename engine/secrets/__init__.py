"""Secrets never come back (beyond the reference; README "Secrets").

Pure and synchronous. Modules::

    randomness.py  is a token machine-made randomness? (and the false-positive policy:
                   hashes, UUIDs, word paths, data blobs are not secrets by shape)
    detect.py      the rules: format tokens, PEM private keys, key=value / 密码是 / flag
                   / URL password / Authorization contexts, random blobs
    redact.py      `secrets.mode` applied to one text (redact / drop / off), the typed
                   placeholder, the secret-free form of a query
    store_scan.py  an existing store's folders: which hold secrets, their redacted form
    rewrite.py     a folder replaced by its redacted form in one atomic step, the backup

Archived text goes through `engine.archive.messages` (both archive paths), queries
through `engine.recall.query` and `engine.recall.search_args`.
"""

from engine.secrets.detect import Finding, find_secrets, has_secret
from engine.secrets.redact import Mode, Redaction, placeholder, redact_text, strip_secrets

__all__ = [
    "Finding",
    "Mode",
    "Redaction",
    "find_secrets",
    "has_secret",
    "placeholder",
    "redact_text",
    "strip_secrets",
]
