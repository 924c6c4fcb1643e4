"""``core.objects``: the API's timestamps read and written."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from webhook.core.api.objects import format_time, not_older, parse_time


def test_format_time_writes_utc_whole_seconds_and_parse_time_reads_it_back() -> None:
    moment = datetime(2026, 11, 23, 23, 5, 7, tzinfo=timezone(timedelta(hours=2)))
    assert format_time(moment) == "2026-11-23T21:05:07Z"
    assert parse_time(format_time(moment)) == moment.astimezone(UTC)


def test_unreadable_timestamps_are_the_epoch() -> None:
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    assert parse_time("yesterday") == epoch
    assert parse_time(None) == epoch
    assert parse_time("2026-11-23T21:05:07") == datetime(2026, 11, 23, 21, 5, 7, tzinfo=UTC)


@pytest.mark.parametrize(
    ("found", "written", "answer"),
    [
        ("7", "7", True),
        ("12", "7", True),
        ("6", "7", False),
        ("", "7", False),
        ("7", "", False),
        ("x", "1", False),
    ],
)
def test_not_older_compares_resource_versions_as_integers(found: str, written: str, answer: bool) -> None:
    assert not_older({"metadata": {"resourceVersion": found}}, written) is answer
