"""What a check returns: every error it found and every warning it has."""

from __future__ import annotations

from dataclasses import dataclass, field

from api.fielderrors import FieldError

__all__ = ["Verdict"]


@dataclass
class Verdict:
    errors: list[FieldError] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def extend(self, other: Verdict) -> Verdict:
        self.errors += other.errors
        self.warnings += other.warnings
        return self

    @property
    def allowed(self) -> bool:
        return not self.errors
