"""Alerting: channels, rules, deliveries, test messages, and the curve picture alerts link to."""

from __future__ import annotations

from typing import Annotated

import httpx
from fastapi import APIRouter, HTTPException, Query, Response

from holter_server.alerts.sparkline import png_sparkline
from holter_server.alerts.targets import TargetGuard, TargetRefused
from holter_server.api.deps import PrincipalDep, RowId, SessionDep, SettingsDep
from holter_server.api.routes.runs import require_run
from holter_server.schemas.alerts import (
    ChannelCreate,
    ChannelPublic,
    DeliveryPublic,
    RuleCreate,
    RulePublic,
    RuleUpdate,
)
from holter_server.services import channels as channels_service
from holter_server.services.alerting import course_of_event
from holter_server.services.channels import StoredChannel
from holter_server.services.dispatch import DeliveryError, send_test

router = APIRouter(tags=["alerts"])


def _require_channel(session: SessionDep, channel_id: RowId) -> StoredChannel:
    channel = channels_service.find_channel(session=session, channel_id=channel_id)
    if channel is None:
        raise HTTPException(status_code=404, detail=f"unknown channel {channel_id}")
    return channel


@router.post(
    "/channels",
    response_model=ChannelPublic,
    status_code=201,
    summary="Add a chat channel (its secret is never shown again)",
)
def add_channel(
    session: SessionDep, settings: SettingsDep, principal: PrincipalDep, body: ChannelCreate
) -> ChannelPublic:
    if principal.project is not None and body.project != principal.project:
        raise HTTPException(status_code=403, detail=f"this key can only add channels for project {principal.project!r}")
    try:  # every kind, Apprise included; checked again, and pinned, at every send
        TargetGuard(allow_private=settings.allow_private_webhooks).check_channel(body.kind, body.target)
    except TargetRefused as exc:
        raise HTTPException(status_code=422, detail=str(exc)) from exc
    channel = channels_service.add_channel(
        session=session,
        name=body.name,
        kind=body.kind,
        project=body.project,
        target=body.target,
        signing_secret=body.signing_secret,
        default_rules=body.default_rules,
    )
    session.commit()
    return ChannelPublic.from_row(channel)


@router.get("/channels", response_model=list[ChannelPublic], summary="Channels (secrets masked)")
def list_channels(session: SessionDep, principal: PrincipalDep, project: str | None = None) -> list[ChannelPublic]:
    rows = channels_service.channels(session=session, project=project or principal.project)
    return [ChannelPublic.from_row(row) for row in rows if principal.sees(row.project)]


@router.delete("/channels/{channel_id}", status_code=204, summary="Remove a channel and its rules")
def delete_channel(session: SessionDep, channel_id: RowId) -> Response:
    channels_service.delete_channel(session=session, channel=_require_channel(session, channel_id))
    session.commit()
    return Response(status_code=204)


@router.post("/channels/{channel_id}/test", summary="Send a test message now (listed with the deliveries)")
def test_channel(session: SessionDep, settings: SettingsDep, channel_id: RowId) -> dict[str, str]:
    channel = _require_channel(session, channel_id)
    with httpx.Client(timeout=settings.alert_timeout) as client:
        try:
            send_test(
                session=session,
                channel=channel,
                client=client,
                base_url=settings.base_url(),
                guard=TargetGuard(allow_private=settings.allow_private_webhooks),
            )
        except DeliveryError as exc:
            session.commit()  # the failed test is listed with the deliveries too
            raise HTTPException(status_code=502, detail=f"the channel did not take the test message: {exc}") from exc
    session.commit()
    return {"status": "delivered"}


@router.post("/rules", response_model=RulePublic, status_code=201, summary="Add an alert rule")
def add_rule(session: SessionDep, principal: PrincipalDep, body: RuleCreate) -> RulePublic:
    channel = _require_channel(session, body.channel_id)
    if not principal.sees(channel.project):
        raise HTTPException(status_code=404, detail=f"unknown channel {body.channel_id}")
    if channel.project is not None and body.project not in (None, channel.project):
        raise HTTPException(
            status_code=422,
            detail=f"channel {channel.id} is project {channel.project!r}'s: its rules see only that project, "
            f"not {body.project!r}",
        )
    rule = channels_service.add_rule(
        session=session, channel_id=body.channel_id, fields=body.model_dump(exclude={"channel_id"})
    )
    session.commit()
    return RulePublic.from_row(rule)


@router.get("/rules", response_model=list[RulePublic], summary="Alert rules")
def list_rules(session: SessionDep, principal: PrincipalDep, channel_id: RowId | None = None) -> list[RulePublic]:
    visible = channels_service.channel_ids_seen_by(session=session, principal=principal)
    return [
        RulePublic.from_row(row)
        for row in channels_service.rules(session=session, channel_id=channel_id)
        if row.channel_id in visible
    ]


@router.patch("/rules/{rule_id}", response_model=RulePublic, summary="Enable or disable a rule")
def update_rule(session: SessionDep, rule_id: RowId, body: RuleUpdate) -> RulePublic:
    rule = channels_service.find_rule(session=session, rule_id=rule_id)
    if rule is None:
        raise HTTPException(status_code=404, detail=f"unknown rule {rule_id}")
    channels_service.set_rule_enabled(session=session, rule=rule, enabled=body.enabled)
    session.commit()
    return RulePublic.from_row(rule)


@router.delete("/rules/{rule_id}", status_code=204, summary="Remove a rule")
def delete_rule(session: SessionDep, rule_id: RowId) -> Response:
    rule = channels_service.find_rule(session=session, rule_id=rule_id)
    if rule is None:
        raise HTTPException(status_code=404, detail=f"unknown rule {rule_id}")
    channels_service.delete_rule(session=session, rule=rule)
    session.commit()
    return Response(status_code=204)


@router.get(
    "/deliveries", response_model=list[DeliveryPublic], summary="Recent deliveries, newest first, with failures"
)
def list_deliveries(
    session: SessionDep,
    principal: PrincipalDep,
    channel_id: RowId | None = None,
    status: str | None = None,
    run_id: str | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> list[DeliveryPublic]:
    visible = channels_service.channel_ids_seen_by(session=session, principal=principal)
    rows = channels_service.deliveries(
        session=session, channel_id=channel_id, status=status, run_id=run_id, limit=limit, project=principal.project
    )
    return [DeliveryPublic.from_row(row) for row in rows if row.channel_id in visible]


@router.post("/deliveries/{delivery_id}/retry", response_model=DeliveryPublic, summary="Queue a failed delivery again")
def retry_delivery(session: SessionDep, delivery_id: RowId) -> DeliveryPublic:
    delivery = channels_service.find_delivery(session=session, delivery_id=delivery_id)
    if delivery is None:
        raise HTTPException(status_code=404, detail=f"unknown delivery {delivery_id}")
    delivery = channels_service.retry_delivery(session=session, delivery=delivery)
    session.commit()
    return DeliveryPublic.from_row(delivery)


@router.get(
    "/runs/{run_id}/events/{event_id}/sparkline.png",
    summary="A picture of an event's whole course on its metric, with the level before it",
    response_class=Response,
    responses={200: {"content": {"image/png": {}}}},
)
def event_sparkline(session: SessionDep, run_id: str, event_id: RowId) -> Response:
    require_run(session, run_id)
    course = course_of_event(session=session, run_id=run_id, event_id=event_id)
    if course is None:
        raise HTTPException(status_code=404, detail=f"run {run_id!r} has no metric event {event_id}")
    picture = png_sparkline(course.values, mark_index=course.start_index, mark_end=course.end_index, level=course.level)
    return Response(picture, media_type="image/png", headers={"Cache-Control": "max-age=3600"})
