"""API schemas for API keys. The key itself is returned once, at creation."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from holter_server.store.models import ApiKeyRow


class KeyCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=128)
    scope: Literal["ingest", "read", "admin"]
    project: str | None = Field(default=None, max_length=128, description="only this project (default: every project)")


class KeyPublic(BaseModel):
    id: int
    name: str
    prefix: str = Field(description="the public part of the key, to recognise it")
    scope: str
    project: str | None
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None

    @classmethod
    def from_row(cls, row: ApiKeyRow) -> KeyPublic:
        return cls(
            id=row.id,
            name=row.name,
            prefix=row.prefix,
            scope=row.scope,
            project=row.project,
            created_at=row.created_at,
            last_used_at=row.last_used_at,
            revoked_at=row.revoked_at,
        )


class KeyCreated(KeyPublic):
    key: str = Field(description="the full key: shown this once, stored only as a hash")


class KeyIdentity(BaseModel):
    """Who the presented key is (`GET /keys/me`), never its secret: what a client such as the
    dashboard's sign-in needs to decide whether this key may be used for it."""

    auth: bool = Field(description="whether this service asks for keys; false: anyone who can reach it is an admin")
    id: int | None = Field(description="the key's id; null for the admin token, or with auth off")
    name: str | None
    prefix: str | None = Field(description="the public part of the key, to recognise it")
    scope: Literal["ingest", "read", "admin"]
    project: str | None = Field(description="the one project the key may touch; null: every project")
    signs_as: str = Field(
        description="the name notes, event decisions and reference choices made with this key are signed with "
        "(the key's name; 'admin' for the admin token; 'local' with auth off)"
    )
