"""Translation problems as values: each names the field it is about (`spec.stages[2].clusterSelector`).

`TranslateError` carries a list of them so a caller can report every problem at once.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Problem:
    path: str  # dotted field path; "" when the problem is about the whole input
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class TranslateError(ValueError):
    """Input that cannot become a rollout; `str()` joins every problem with `; `."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        super().__init__("; ".join(str(p) for p in problems))


def fail(path: str, message: str) -> TranslateError:
    return TranslateError([Problem(path, message)])
