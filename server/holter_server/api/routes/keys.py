"""API keys: create (shown once), list, revoke. Admin only."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException

from holter_server.api.deps import PrincipalDep, RowId, SessionDep
from holter_server.schemas.keys import KeyCreate, KeyCreated, KeyPublic
from holter_server.services.auth import create_key
from holter_server.store import keys as keys_store

router = APIRouter(prefix="/keys", tags=["keys"])


@router.post("", response_model=KeyCreated, status_code=201, summary="Create an API key (the key is shown only in this answer)")
def add_key(session: SessionDep, principal: PrincipalDep, body: KeyCreate) -> KeyCreated:
    if principal.project is not None and body.project != principal.project:
        raise HTTPException(status_code=403, detail=f"this key can only create keys for project {principal.project!r}")
    row, full = create_key(session=session, name=body.name, scope=body.scope, project=body.project)
    session.commit()
    return KeyCreated(**KeyPublic.from_row(row).model_dump(), key=full)


@router.get("", response_model=list[KeyPublic], summary="API keys (never their secrets)")
def list_keys(session: SessionDep, principal: PrincipalDep) -> list[KeyPublic]:
    return [KeyPublic.from_row(row) for row in keys_store.list_keys(session=session) if principal.sees(row.project)]


@router.delete("/{key_id}", response_model=KeyPublic, summary="Revoke a key")
def revoke_key(session: SessionDep, principal: PrincipalDep, key_id: RowId) -> KeyPublic:
    row = keys_store.get_key(session=session, key_id=key_id)
    if row is None or not principal.sees(row.project):
        raise HTTPException(status_code=404, detail=f"unknown key {key_id}")
    keys_store.revoke(session=session, key=row)
    session.commit()
    return KeyPublic.from_row(row)
