"""The JSON vocabulary every command's ``--json`` output speaks (docs/json.md).

One meaning per key in every command; times in link-times for unit shards,
bandwidths with their unit in the key (``_Bps`` bytes/s, ``_GBps`` 1e9 bytes/s),
durations in seconds.  :data:`JSON_VERSION` changes whenever a key changes
meaning or disappears; every printed object starts with it.
"""

from __future__ import annotations

#: Version of the vocabulary in docs/json.md.
JSON_VERSION = 1


def versioned(obj: dict) -> dict:
    """``obj`` with ``json_version`` as its first key."""
    return {"json_version": JSON_VERSION, **obj}
