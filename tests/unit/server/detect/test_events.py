import json

from holter_server.detect import Event


def test_event_round_trips_through_json():
    event = Event(
        kind="spike",
        metric="loss",
        start_step=1204,
        end_step=1204,
        severity="info",
        score=9.3,
        summary="loss jumped",
        peak_step=1204,
    )
    data = json.loads(json.dumps(event.to_dict()))
    assert Event.from_dict(data) == event and data["event_id"] == "loss:spike@1204"


def test_event_dict_has_the_documented_fields():
    event = Event(
        kind="sawtooth", metric="x", start_step=1, end_step=9, severity="info", score=1.0, summary="s", period=4.0
    )
    assert {"kind", "start_step", "end_step", "peak_step", "severity", "score", "period", "summary"} <= set(
        event.to_dict()
    )
