"""The sets of each namespace as the claim rule sees them (`pool.rules.claims`), indexed so
that comparing one set, or one Lease's selector, with the others costs the sets it may
match, not the namespace. Pure: no I/O, no locking (its users lock).

Kept up to date one set at a time (`put` when a set is written, `drop` when it goes or
starts being deleted), as client-go's indexers are by the watch:
- by instance label: (namespace, key, value) -> the sets whose instances carry it; a
  selector's candidates are those under one of its `matchLabels` pairs (or under the
  values of an `In` expression), every other set failing it;
- by selector anchor (`anchor`): a set under one pair of its selector's `matchLabels`,
  which any labels it matches must carry, or under None when it has none; the sets whose
  selector may match some labels are those under one of their pairs or under None.
A Lease's selector is anchored alike (`reconciler.runtime.caches` indexes Leases by it).
Candidates are then checked with the rule's own matching, so an index is only ever a
narrowing: what it returns is what a scan of the namespace would.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from pool.model.views import PoolClaim
from pool.rules.claims import matches

__all__ = ["ClaimIndex", "anchor", "anchors_of"]

Pair = tuple[str, str]


def anchor(selector: Any) -> Pair | None:
    """The `matchLabels` pair every label set the selector matches must carry (the least,
    so that it is the same wherever it is worked out); None when it has none."""
    if not isinstance(selector, Mapping):
        return None
    match_labels = selector.get("matchLabels")
    if not isinstance(match_labels, Mapping) or not match_labels:
        return None
    return min((str(k), str(v)) for k, v in match_labels.items())


def anchors_of(labels: Mapping[str, str]) -> list[Pair | None]:
    """The anchors of every selector that may match `labels`: one of its pairs, or None."""
    return [*labels.items(), None]


class ClaimIndex:
    def __init__(self) -> None:
        self._claims: dict[str, dict[str, PoolClaim]] = defaultdict(dict)
        self._by_label: dict[tuple[str, str, str], set[str]] = defaultdict(set)
        self._by_anchor: dict[tuple[str, Pair | None], set[str]] = defaultdict(set)

    def put(self, namespace: str, claim: PoolClaim) -> None:
        """A set as it is now (replacing what it was)."""
        self.drop(namespace, claim.name)
        self._claims[namespace][claim.name] = claim
        for key, value in claim.labels.items():
            self._by_label[(namespace, key, value)].add(claim.name)
        self._by_anchor[(namespace, anchor(claim.selector))].add(claim.name)

    def drop(self, namespace: str, name: str) -> None:
        """A set gone, or being deleted (no longer a rival)."""
        claim = self._claims.get(namespace, {}).pop(name, None)
        if claim is None:
            return
        for key, value in claim.labels.items():
            _discard(self._by_label, (namespace, key, value), name)
        _discard(self._by_anchor, (namespace, anchor(claim.selector)), name)
        if not self._claims[namespace]:
            del self._claims[namespace]

    def get(self, namespace: str, name: str) -> PoolClaim | None:
        return self._claims.get(namespace, {}).get(name)

    def __len__(self) -> int:
        return sum(len(claims) for claims in self._claims.values())

    def matching(
        self, namespace: str, selector: Any, *, unreadable: bool = False
    ) -> list[PoolClaim]:
        """The sets whose instance labels `selector` matches, by name. A selector the rule
        cannot read matches none, or every set with `unreadable` (a wake-up: their passes
        say what they make of it)."""
        claims = self._claims.get(namespace, {})
        found = [
            claims[name]
            for name in self._candidates(namespace, selector)
            if matches(selector, claims[name].labels, unreadable=unreadable)
        ]
        return sorted(found, key=lambda claim: claim.name)

    def selecting(self, namespace: str, labels: Mapping[str, str]) -> list[PoolClaim]:
        """The sets whose own selector matches `labels`, by name."""
        claims = self._claims.get(namespace, {})
        names = {
            name
            for pair in anchors_of(labels)
            for name in self._by_anchor.get((namespace, pair), ())
        }
        return sorted(
            (claims[n] for n in names if matches(claims[n].selector, labels)),
            key=lambda claim: claim.name,
        )

    def overlapping(self, namespace: str, claim: PoolClaim) -> list[PoolClaim]:
        """The other sets either of whose selectors matches the other's instance labels
        (`pool.rules.claims.overlap`), by name."""
        found = {c.name: c for c in self.matching(namespace, claim.selector)}
        found.update((c.name, c) for c in self.selecting(namespace, claim.labels))
        found.pop(claim.name, None)
        return [found[name] for name in sorted(found)]

    def _candidates(self, namespace: str, selector: Any) -> Iterable[str]:
        """The sets that may satisfy `selector`: those under one of its label pairs, or
        under the values of an `In` expression; every set when it has neither."""
        everyone = self._claims.get(namespace, {})
        match_labels = selector.get("matchLabels") if isinstance(selector, Mapping) else None
        if isinstance(match_labels, Mapping) and match_labels:
            buckets: list[set[str]] = [
                self._by_label.get((namespace, str(k), str(v)), set())
                for k, v in match_labels.items()
            ]
            smallest = min(buckets, key=lambda bucket: len(bucket))
            return list(smallest)
        expressions = selector.get("matchExpressions") if isinstance(selector, Mapping) else None
        for expression in expressions if isinstance(expressions, list) else ():
            values = expression.get("values") if isinstance(expression, Mapping) else None
            if isinstance(values, list) and expression.get("operator") == "In":
                key = str(expression.get("key"))
                return list(
                    {
                        name
                        for value in values
                        for name in self._by_label.get((namespace, key, str(value)), ())
                    }
                )
        return list(everyone)


def _discard(index: dict[Any, set[str]], key: Any, name: str) -> None:
    bucket = index.get(key)
    if bucket is not None:
        bucket.discard(name)
        if not bucket:
            del index[key]
