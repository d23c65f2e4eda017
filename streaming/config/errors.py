"""How configuration problems are raised: ``ConfigError`` for the user, and the one
pydantic error by which a section's cross-field rules report every problem they find."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic_core import PydanticCustomError

__all__ = ["CROSS_FIELD", "ConfigError", "Problem", "raise_problems"]

CROSS_FIELD = "cross_field"
"""The pydantic error type of ``raise_problems``; the loader splits it back into lines."""

Problem = tuple[str, str, tuple[str, ...]]
"""A cross-field problem: (field, why, the fields whose source is blamed, first set wins)."""


class ConfigError(Exception):
    """The configuration is unusable; the message lists every problem, one per line.

    Each line reads ``<source>: <dotted.key>: <why>``; ``problems`` holds the lines.
    """

    def __init__(self, problems: str | Sequence[str]) -> None:
        self.problems: tuple[str, ...] = (
            (problems,) if isinstance(problems, str) else tuple(problems)
        )
        super().__init__("\n".join(self.problems))


def raise_problems(problems: list[Problem]) -> None:
    """Raise the cross-field problems of one model as one error; load_config splits it."""
    if problems:
        summary = "; ".join(f"{field}: {why}" for field, why, _ in problems)
        raise PydanticCustomError(
            CROSS_FIELD, "{summary}", {"summary": summary, "problems": tuple(problems)}
        )
