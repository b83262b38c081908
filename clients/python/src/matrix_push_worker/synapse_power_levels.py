"""Power levels as Synapse's event auth reads them, for `evaluate`'s `room`: the sender's level and the
power levels' `notifications`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .synapse_objects import RoomVersionLike, StateEventLike, StateMap

CREATE = "m.room.create"
POWER_LEVELS = "m.room.power_levels"

CREATOR_POWER_LEVEL = 2**53
"""A creator's power level in room versions where creators outrank everyone (MSC4289, v12), as
Synapse counts it."""


def sender_power_level(sender: str, state: StateMap, version: RoomVersionLike) -> int | None:
    """The sender's power level as Synapse's event auth computes it; None when it cannot be read (no
    create event, or a level that is no number)."""
    create = state.get((CREATE, ""))
    if create is None:
        return None
    if version.msc4289_creator_power_enabled and _is_creator(create, sender, version):
        return CREATOR_POWER_LEVEL
    power_levels = state.get((POWER_LEVELS, ""))
    if power_levels is not None:
        users = power_levels.content.get("users")
        level = users.get(sender) if isinstance(users, Mapping) else None
        if level is None:
            level = power_levels.content.get("users_default", 0)
        return 0 if level is None else _as_int(level)
    creator = create.sender if version.implicit_room_creator else create.content.get("creator")
    return 100 if creator == sender else 0


def notification_power_levels(state: StateMap, version: RoomVersionLike) -> dict[str, int]:
    """The power levels' `notifications`: in room versions before integers were enforced, values that
    are no integer are read as one (as Synapse does) or left out; the pool takes integers only."""
    power_levels = state.get((POWER_LEVELS, ""))
    levels = power_levels.content.get("notifications") if power_levels is not None else None
    if not isinstance(levels, Mapping):
        return {}
    read: dict[str, int] = {}
    for key, level in levels.items():
        if type(level) is int:
            read[str(key)] = level
        elif not version.enforce_int_power_levels:
            value = _as_int(level)
            if value is not None:
                read[str(key)] = value
    return read


def _is_creator(create: StateEventLike, user_id: str, version: RoomVersionLike) -> bool:
    if create.sender == user_id:
        return True
    if not version.msc4289_creator_power_enabled:
        return False
    additional = create.content.get("additional_creators")
    return isinstance(additional, Sequence) and not isinstance(additional, str) and user_id in additional


def _as_int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return None
