"""RECORD_SCHEMA: the BuildRecord layout's version, in a module of its own.

A cache hit names its entry with this number (``backends.request.cache_key``) and checks a stored
record's stamp against it (``record_store``) without loading the record classes.
"""

from __future__ import annotations

RECORD_SCHEMA = 1
