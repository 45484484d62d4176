"""API keys: create (shown once), list, revoke (admin only); and who the presented key is (any key)."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Request

from holter_server.api.deps import PrincipalDep, RowId, SessionDep
from holter_server.schemas.keys import KeyCreate, KeyCreated, KeyIdentity, KeyPublic
from holter_server.services import auth
from holter_server.services.auth import OPEN, create_key

router = APIRouter(prefix="/keys", tags=["keys"])


@router.post(
    "", response_model=KeyCreated, status_code=201, summary="Create an API key (the key is shown only in this answer)"
)
def add_key(session: SessionDep, principal: PrincipalDep, body: KeyCreate) -> KeyCreated:
    if principal.project is not None and body.project != principal.project:
        raise HTTPException(status_code=403, detail=f"this key can only create keys for project {principal.project!r}")
    row, full = create_key(session=session, name=body.name, scope=body.scope, project=body.project)
    session.commit()
    return KeyCreated(**KeyPublic.from_row(row).model_dump(), key=full)


@router.get("", response_model=list[KeyPublic], summary="API keys (never their secrets)")
def list_keys(session: SessionDep, principal: PrincipalDep) -> list[KeyPublic]:
    return [KeyPublic.from_row(row) for row in auth.list_keys(session=session) if principal.sees(row.project)]


@router.get(
    "/me",
    response_model=KeyIdentity,
    summary="Who the presented key is: its id, name, scope and project (never its secret)",
)
def who_am_i(request: Request, session: SessionDep, principal: PrincipalDep) -> KeyIdentity:
    # The gate answered 401 for a missing, unknown or revoked key; with auth off everyone is the open admin.
    if not request.app.state.auth_mode.enabled(session):
        return KeyIdentity(auth=False, id=None, name=None, prefix=None, scope="admin", project=None, signs_as=OPEN.name)
    row = auth.get_key(session=session, key_id=principal.key_id) if principal.key_id is not None else None
    if row is None:  # the admin token (HOLTER_ADMIN_TOKEN) is no stored key
        return KeyIdentity(
            auth=True,
            id=None,
            name="admin token",
            prefix=None,
            scope=principal.scope,  # type: ignore[arg-type]
            project=principal.project,
            signs_as=principal.name,
        )
    return KeyIdentity(
        auth=True,
        id=row.id,
        name=row.name,
        prefix=row.prefix,
        scope=row.scope,  # type: ignore[arg-type]
        project=row.project,
        signs_as=principal.name,
    )


@router.delete("/{key_id}", response_model=KeyPublic, summary="Revoke a key")
def revoke_key(session: SessionDep, principal: PrincipalDep, key_id: RowId) -> KeyPublic:
    row = auth.get_key(session=session, key_id=key_id)
    if row is None or not principal.sees(row.project):
        raise HTTPException(status_code=404, detail=f"unknown key {key_id}")
    auth.revoke_key(session=session, key=row)
    session.commit()
    return KeyPublic.from_row(row)
