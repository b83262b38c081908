"""Events and room state shaped as Synapse hands them to a module's `on_new_event`, built from plain
values with partial overrides, for the tests of `synapse_event_plan` (which reads them through its
protocols, as it reads Synapse's own objects)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

SERVER = "hs.test"


class Frozen(Mapping[str, Any]):
    """An immutable mapping that `json` cannot write, as Synapse's event content is."""

    def __init__(self, values: Mapping[str, Any]) -> None:
        self._values = dict(values)

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)


@dataclass(frozen=True)
class Version:
    """Room version flags: v1 by default."""

    enforce_int_power_levels: bool = False
    implicit_room_creator: bool = False
    msc4289_creator_power_enabled: bool = False


V1 = Version()
V10 = Version(enforce_int_power_levels=True)
V11 = Version(enforce_int_power_levels=True, implicit_room_creator=True)
V12 = Version(enforce_int_power_levels=True, implicit_room_creator=True, msc4289_creator_power_enabled=True)


@dataclass(frozen=True)
class Metadata:
    outlier: bool = False
    out_of_band_membership: bool = False
    soft_failed: bool = False

    def is_notifiable(self) -> bool:
        return not self.outlier or self.out_of_band_membership

    def is_outlier(self) -> bool:
        return self.outlier

    def is_soft_failed(self) -> bool:
        return self.soft_failed


@dataclass(frozen=True)
class Unsigned:
    values: Mapping[str, Any] = field(default_factory=dict)

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)


@dataclass(frozen=True)
class Event:
    sender: str
    content: Mapping[str, Any]
    type: str = "m.room.message"
    event_id: str = "$event"
    room_id: str = f"!room:{SERVER}"
    origin_server_ts: int = 1_700_000_000_000
    state_key: str | None = None
    redacts: Any = None
    unsigned: Unsigned = field(default_factory=Unsigned)
    internal_metadata: Metadata = field(default_factory=Metadata)
    room_version: Version = V10

    def get_state_key(self) -> str | None:
        return self.state_key


def message(sender: str = f"@alice:{SERVER}", body: str = "hi", **overrides: Any) -> Event:
    event = Event(sender=sender, content=Frozen({"msgtype": "m.text", "body": body}))
    return replace(event, **overrides)


def member_event(sender: str, target: str, membership: str, **overrides: Any) -> Event:
    content = {"membership": membership, **overrides.pop("content", {})}
    event = Event(sender=sender, content=Frozen(content), type="m.room.member", state_key=target)
    return replace(event, **overrides)


def room(
    *members: tuple[str, str] | tuple[str, str, str],
    creator: str = f"@alice:{SERVER}",
    create_content: Mapping[str, Any] | None = None,
    power_levels: Mapping[str, Any] | None = None,
    extra: Mapping[tuple[str, str], Event] | None = None,
) -> dict[tuple[str, str], Event]:
    """Current state: a create event, `(user_id, membership[, displayname])` members, power levels
    when given, and any other state events."""
    state: dict[tuple[str, str], Event] = {
        ("m.room.create", ""): Event(
            sender=creator,
            content=Frozen(create_content if create_content is not None else {"creator": creator}),
            type="m.room.create",
            state_key="",
        )
    }
    for user_id, membership, *name in members:
        content = {"membership": membership, **({"displayname": name[0]} if name else {})}
        state[("m.room.member", user_id)] = member_event(user_id, user_id, membership, content=content)
    if power_levels is not None:
        state[("m.room.power_levels", "")] = Event(
            sender=creator, content=Frozen(power_levels), type="m.room.power_levels", state_key=""
        )
    state.update(extra or {})
    return state


def state_event(kind: str, content: Mapping[str, Any], sender: str = f"@alice:{SERVER}") -> Event:
    return Event(sender=sender, content=Frozen(content), type=kind, state_key="")
