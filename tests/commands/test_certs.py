"""``draxr certs``: sentences for people by default, the certificates' details with ``-o json|yaml``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from webhook.cli import main
from webhook.install.certs import describe


def test_by_default_it_says_what_it_made_in_sentences(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_dir = tmp_path / "certs"
    assert main(["certs", "--out", str(out_dir), "--ip", "10.0.0.7"]) == 0
    captured = capsys.readouterr()
    info = describe(out_dir)
    lines = captured.out.splitlines()
    assert len(lines) == 3
    assert lines[0] == (
        f"CA {out_dir / 'ca.crt'} ({info['ca']['subject']}) is valid until {info['ca']['not_after'][:10]}."
    )
    assert lines[1].startswith(
        f"Serving certificate {out_dir / 'tls.crt'} (key tls.key) names draxr-webhook,"
    )
    assert "draxr-webhook.draxr-system.svc, " in lines[1]
    assert "10.0.0.7" in lines[1]
    assert lines[1].endswith(f"is valid until {info['serving']['not_after'][:10]}.")
    assert lines[2].startswith(f"Next: draxr manifests --ca-bundle {out_dir / 'ca.crt'}")
    assert "{" not in captured.out  # no JSON for people
    assert captured.err.startswith("CA files missing; wrote ")


@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_machines_get_the_details(fmt: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["certs", "--out", str(tmp_path), "-o", fmt]) == 0
    out = capsys.readouterr().out
    loaded = json.loads(out) if fmt == "json" else yaml.safe_load(out)
    assert loaded == json.loads(json.dumps(describe(tmp_path), default=str))
    assert capsys.readouterr().err == ""
    assert main(["certs", "--out", str(tmp_path), "-o", fmt]) == 0  # kept: the same details
    again = capsys.readouterr()
    assert again.out == out
    assert again.err == "certificates checked; wrote nothing (existing files are valid)\n"
