import pytest

from webhook.core.api.semver import Semver, SemverError, is_semver


def test_precedence() -> None:
    order = [
        "1.0.0-alpha",
        "1.0.0-alpha.1",
        "1.0.0-alpha.beta",
        "1.0.0-beta",
        "1.0.0-beta.2",
        "1.0.0-beta.11",
        "1.0.0-rc.1",
        "1.0.0",
        "1.2.3",
        "2.0.0",
    ]
    parsed = [Semver.parse(v) for v in order]
    assert parsed == sorted(parsed)
    assert Semver.parse("1.0.0+build.1") == Semver.parse("1.0.0+other")


@pytest.mark.parametrize("bad", ["1.2", "01.2.3", "1.2.3-", "v1.2.3", "1.2.3-01", ""])
def test_strict_rejects(bad: str) -> None:
    assert not is_semver(bad)
    with pytest.raises(SemverError):
        Semver.parse(bad)


def test_normalize() -> None:
    assert Semver.parse("v1.2", normalize=True) == Semver.parse("1.2.0")
    assert str(Semver.parse("1.2.3-rc.1+b5")) == "1.2.3-rc.1+b5"
