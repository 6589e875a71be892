"""RFC 3339 timestamps as Kubernetes writes them (UTC, whole seconds, `Z`). No I/O."""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = ["format_time", "parse_time"]


def format_time(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str) -> datetime:
    """Parse `2026-01-02T03:04:05Z` (fractions and offsets accepted); ValueError if not."""
    parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed
