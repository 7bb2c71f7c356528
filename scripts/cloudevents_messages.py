"""Kafka messages made by the CloudEvents SDK's own Kafka bindings.

Run by scripts/cloudevents-sdk.sh in the venv it makes, for
tests/cloudevents.rs. Reads one event a line on stdin:

    {"api": "v1" | "core", "mode": "binary" | "structured",
     "attributes": {...}, "data": {...}}

and writes, one a line, the KafkaMessage the SDK made of it:

    {"headers": [[key, value], ...], "key": "...", "value": "..."}

The two APIs of the SDK differ where the consumer must not: `v1`
(`cloudevents.v1.kafka`) sends a structured event with the event's
`datacontenttype` as its `content-type` (`application/json`); `core`
(`cloudevents.core.bindings.kafka`) with `application/cloudevents+json`.
Headers, key and value are UTF-8 text here (JSON events); anything else
fails loudly rather than being altered.
"""

import json
import sys
from datetime import datetime

from cloudevents.core.bindings import kafka as core_kafka
from cloudevents.core.v1.event import CloudEvent as CoreCloudEvent
from cloudevents.v1 import kafka as v1_kafka
from cloudevents.v1.http import CloudEvent as V1CloudEvent


def render(spec):
    attributes = dict(spec["attributes"])
    data = spec["data"]
    binary = {"binary": True, "structured": False}[spec["mode"]]
    if spec["api"] == "v1":
        event = V1CloudEvent(attributes, data)
        to_message = v1_kafka.to_binary if binary else v1_kafka.to_structured
        return to_message(event)
    if spec["api"] == "core":
        # The core API holds the time as an aware datetime and writes it
        # back in RFC 3339.
        if "time" in attributes:
            attributes["time"] = datetime.fromisoformat(attributes["time"])
        event = CoreCloudEvent(attributes, data)
        to_message = core_kafka.to_binary_event if binary else core_kafka.to_structured_event
        return to_message(event)
    raise ValueError(f"unknown api {spec['api']!r}")


def text(value):
    return value.decode("utf-8") if isinstance(value, (bytes, bytearray)) else value


def main():
    for line in sys.stdin:
        if not line.strip():
            continue
        message = render(json.loads(line))
        print(
            json.dumps(
                {
                    "headers": [[key, text(value)] for key, value in message.headers.items()],
                    "key": text(message.key),
                    "value": text(message.value),
                }
            ),
            flush=True,
        )


if __name__ == "__main__":
    main()
