"""RFC 3339 timestamps as Kubernetes writes them (UTC, whole seconds, `Z`), and durations
as Go spells them in a spec (`5m`, `1h30m`, `2.5s`). No I/O."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

__all__ = ["format_duration", "format_time", "parse_time"]


def format_time(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str) -> datetime:
    """Parse `2026-01-02T03:04:05Z` (fractions and offsets accepted); ValueError if not."""
    parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed


def format_duration(span: timedelta) -> str:
    """`scaleDownCooldown` as a person wrote it: `5m`, `1h30m`, `2.5s`, `0s` (Go units,
    zero parts left out)."""
    micros = span // timedelta(microseconds=1)
    sign, micros = ("-", -micros) if micros < 0 else ("", micros)
    hours, rest = divmod(micros, 3_600_000_000)
    minutes, rest = divmod(rest, 60_000_000)
    seconds = f"{rest / 1_000_000:g}s" if rest else ""
    text = (f"{hours}h" if hours else "") + (f"{minutes}m" if minutes else "") + seconds
    return sign + (text or "0s")
