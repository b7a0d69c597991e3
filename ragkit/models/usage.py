"""Token usage of a remote model adapter's calls, per call and per role."""

from __future__ import annotations

from collections import Counter, defaultdict, deque
from dataclasses import dataclass, field

from ragkit.protocols.models import Usage


@dataclass(frozen=True)
class UsageRecord:
    """Tokens of one call, as the service reported them (0 when it did not)."""

    role: str
    input_tokens: int
    output_tokens: int


@dataclass
class UsageLog:
    """Token usage per call and per role (``ChatRequest.role``; embedders use
    ``"embedding"``, rerankers ``"rerank"``). Keeps the last ``keep`` calls
    and exact totals for all of them."""

    keep: int = 10_000
    calls: deque[UsageRecord] = field(init=False, repr=False)
    counts: Counter[str] = field(init=False, default_factory=Counter)
    _tokens: defaultdict[str, list[int]] = field(
        init=False, repr=False, default_factory=lambda: defaultdict(lambda: [0, 0])
    )

    def __post_init__(self) -> None:
        self.calls = deque(maxlen=self.keep)

    def record(self, role: str, input_tokens: int | None, output_tokens: int | None = 0) -> Usage:
        usage = Usage(input_tokens=max(0, input_tokens or 0), output_tokens=max(0, output_tokens or 0))
        self.calls.append(UsageRecord(role, usage.input_tokens, usage.output_tokens))
        self.counts[role] += 1
        totals = self._tokens[role]
        totals[0] += usage.input_tokens
        totals[1] += usage.output_tokens
        return usage

    def by_role(self) -> dict[str, Usage]:
        return {role: Usage(input_tokens=i, output_tokens=o) for role, (i, o) in self._tokens.items()}

    def total(self) -> Usage:
        roles = self.by_role().values()
        return Usage(
            input_tokens=sum(u.input_tokens for u in roles), output_tokens=sum(u.output_tokens for u in roles)
        )

