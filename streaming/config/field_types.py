"""The setting types and model options the sections share."""

from __future__ import annotations

from typing import Annotated

from pydantic import ConfigDict, Field

__all__ = ["FROZEN", "NonEmptyStr", "Port"]

FROZEN = ConfigDict(extra="forbid", frozen=True)
"""Every section: an unknown key is an error, and a loaded configuration never changes."""

NonEmptyStr = Annotated[str, Field(min_length=1)]
Port = Annotated[int, Field(ge=1, le=65535)]
