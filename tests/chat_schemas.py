"""JSON Schemas of what each chat service documents for its incoming webhooks (the parts Holter
uses, with their documented limits), to validate Holter's payloads against.

Slack Block Kit (api.slack.com/reference/block-kit), Discord webhook + embed
(discord.com/developers/docs/resources/webhook), Teams Workflows webhook with an Adaptive Card
(adaptivecards.io, schema 1.4).
"""

from __future__ import annotations

PLAIN = {
    "type": "object",
    "required": ["type", "text"],
    "properties": {"type": {"const": "plain_text"}, "text": {"type": "string", "minLength": 1, "maxLength": 150}},
}
MRKDWN = lambda limit: {  # noqa: E731 — a schema family beside the schema constants
    "type": "object",
    "required": ["type", "text"],
    "properties": {"type": {"const": "mrkdwn"}, "text": {"type": "string", "minLength": 1, "maxLength": limit}},
}

SLACK = {
    "type": "object",
    "required": ["blocks"],
    "properties": {
        "text": {"type": "string"},
        "blocks": {
            "type": "array",
            "minItems": 1,
            "maxItems": 50,
            "items": {
                "oneOf": [
                    {
                        "type": "object",
                        "required": ["type", "text"],
                        "properties": {"type": {"const": "header"}, "text": PLAIN},
                    },
                    {
                        "type": "object",
                        "required": ["type"],
                        "properties": {
                            "type": {"const": "section"},
                            "text": MRKDWN(3000),
                            "fields": {"type": "array", "maxItems": 10, "items": MRKDWN(2000)},
                        },
                    },
                    {
                        "type": "object",
                        "required": ["type", "elements"],
                        "properties": {
                            "type": {"const": "context"},
                            "elements": {"type": "array", "minItems": 1, "maxItems": 10, "items": MRKDWN(3000)},
                        },
                    },
                    {
                        "type": "object",
                        "required": ["type", "image_url", "alt_text"],
                        "properties": {
                            "type": {"const": "image"},
                            "image_url": {"type": "string", "maxLength": 3000, "pattern": "^https?://"},
                            "alt_text": {"type": "string", "maxLength": 2000},
                        },
                    },
                    {
                        "type": "object",
                        "required": ["type", "elements"],
                        "properties": {
                            "type": {"const": "actions"},
                            "elements": {
                                "type": "array",
                                "maxItems": 25,
                                "items": {
                                    "type": "object",
                                    "required": ["type", "text"],
                                    "properties": {
                                        "type": {"const": "button"},
                                        "text": {
                                            "type": "object",
                                            "properties": {
                                                "type": {"const": "plain_text"},
                                                "text": {"type": "string", "maxLength": 75},
                                            },
                                        },
                                        "url": {"type": "string", "maxLength": 3000, "pattern": "^https?://"},
                                    },
                                },
                            },
                        },
                    },
                ]
            },
        },
    },
}

DISCORD = {
    "type": "object",
    "anyOf": [{"required": ["content"]}, {"required": ["embeds"]}],
    "properties": {
        "content": {"type": "string", "maxLength": 2000},
        "username": {"type": "string", "maxLength": 80},
        "embeds": {
            "type": "array",
            "maxItems": 10,
            "items": {
                "type": "object",
                "properties": {
                    "title": {"type": "string", "maxLength": 256},
                    "description": {"type": "string", "maxLength": 4096},
                    "url": {"type": "string", "pattern": "^https?://"},
                    "color": {"type": "integer", "minimum": 0, "maximum": 0xFFFFFF},
                    "timestamp": {"type": "string", "format": "date-time"},
                    "footer": {
                        "type": "object",
                        "required": ["text"],
                        "properties": {"text": {"type": "string", "maxLength": 2048}},
                    },
                    "image": {
                        "type": "object",
                        "required": ["url"],
                        "properties": {"url": {"type": "string", "pattern": "^https?://"}},
                    },
                    "fields": {
                        "type": "array",
                        "maxItems": 25,
                        "items": {
                            "type": "object",
                            "required": ["name", "value"],
                            "properties": {
                                "name": {"type": "string", "minLength": 1, "maxLength": 256},
                                "value": {"type": "string", "minLength": 1, "maxLength": 1024},
                                "inline": {"type": "boolean"},
                            },
                        },
                    },
                },
            },
        },
    },
}

ADAPTIVE_ELEMENT = {
    "oneOf": [
        {
            "type": "object",
            "required": ["type", "text"],
            "properties": {"type": {"const": "TextBlock"}, "text": {"type": "string", "minLength": 1}},
        },
        {
            "type": "object",
            "required": ["type", "facts"],
            "properties": {
                "type": {"const": "FactSet"},
                "facts": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["title", "value"],
                        "properties": {"title": {"type": "string"}, "value": {"type": "string"}},
                    },
                },
            },
        },
        {
            "type": "object",
            "required": ["type", "url"],
            "properties": {"type": {"const": "Image"}, "url": {"type": "string", "pattern": "^https?://"}},
        },
    ]
}

TEAMS = {
    "type": "object",
    "required": ["type", "attachments"],
    "properties": {
        "type": {"const": "message"},
        "attachments": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["contentType", "content"],
                "properties": {
                    "contentType": {"const": "application/vnd.microsoft.card.adaptive"},
                    "content": {
                        "type": "object",
                        "required": ["type", "version", "body"],
                        "properties": {
                            "type": {"const": "AdaptiveCard"},
                            "version": {"type": "string", "pattern": "^1\\.[0-6]$"},
                            "body": {"type": "array", "minItems": 1, "items": ADAPTIVE_ELEMENT},
                            "actions": {
                                "type": "array",
                                "items": {
                                    "type": "object",
                                    "required": ["type", "url"],
                                    "properties": {
                                        "type": {"const": "Action.OpenUrl"},
                                        "url": {"type": "string", "pattern": "^https?://"},
                                    },
                                },
                            },
                        },
                    },
                },
            },
        },
    },
}

WEBHOOK = {
    "type": "object",
    "required": ["type", "idempotency_key", "title", "alerts"],
    "properties": {
        "type": {"enum": ["holter.alert", "holter.resolved", "holter.test"]},
        "alerts": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": [
                    "project",
                    "run_id",
                    "metric",
                    "kind",
                    "severity",
                    "summary",
                    "step",
                    "time",
                    "link",
                    "sparkline",
                ],
            },
        },
    },
}

SCHEMAS = {"slack": SLACK, "discord": DISCORD, "teams": TEAMS, "webhook": WEBHOOK}
