"""Every ``draxr`` command fails on a bad flag or value with one line on stderr and a non-zero
exit status, never a usage block or a traceback (``webhook.cli``, ``webhook.commands.flags``)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from webhook import cli
from webhook.cli import main
from webhook.commands import flags, plan

DATA = Path(__file__).resolve().parent / "data" / "loader"
ROOT = Path(__file__).resolve().parents[1]

BAD_FLAGS: list[tuple[list[str], str]] = [
    ([], "draxr: error: the following arguments are required: COMMAND"),
    (["bogus"], "draxr: error: COMMAND: invalid choice: 'bogus'"),
    (["plan", "-f", "x", "--bogus"], "draxr: error: unrecognized arguments: --bogus"),
    # serve
    (["serve", "--port", "99999"], "draxr serve: error: --port: must be between 0 and 65535, not 99999"),
    (["serve", "--port", "http"], "draxr serve: error: --port: must be a whole number, not 'http'"),
    (["serve", "--qps", "-1"], "draxr serve: error: --qps: must be a positive number, not -1"),
    (["serve", "--burst", "0"], "draxr serve: error: --burst: must be a positive whole number, not 0"),
    (["serve", "--class-read-timeout", "-0.5"], "draxr serve: error: --class-read-timeout: must be zero or"),
    (
        ["serve", "--read-header-timeout", "0"],
        "draxr serve: error: --read-header-timeout: must be a positive",
    ),
    (["serve", "--read-body-timeout", "inf"], "draxr serve: error: --read-body-timeout: must be a finite"),
    (["serve", "--review-threads", "-1"], "draxr serve: error: --review-threads: must be zero or a positive"),
    (
        ["serve", "--gang-search-steps", "-1"],
        "draxr serve: error: --gang-search-steps: must be zero or a positive",
    ),
    (["serve", "--max-large-reviews", "0"], "draxr serve: error: --max-large-reviews: must be a positive"),
    (["serve", "--route", "sometimes"], "draxr serve: error: --route: invalid choice: 'sometimes'"),
    (
        ["serve", "--managed-classes", "tier in (a"],
        "draxr serve: error: --managed-classes: 'tier in (a' is not a label selector",
    ),
    (
        ["serve", "--unsupported-pods", "allow"],
        "draxr serve: error: --unsupported-pods: invalid choice: 'allow'",
    ),
    (
        ["serve", "--namespace", "Draxr"],
        "draxr serve: error: --namespace: 'Draxr' is not a valid DNS-1123 label",
    ),
    (
        ["serve", "--lease-name", "a_b"],
        "draxr serve: error: --lease-name: 'a_b' is not a valid DNS-1123 subdomain",
    ),
    (["serve", "--host", ""], "draxr serve: error: --host: must not be empty"),
    (["serve", "--cert-dir", ""], "draxr serve: error: --cert-dir: must not be empty"),
    (["serve", "--kubeconfig", ""], "draxr serve: error: --kubeconfig: must not be empty"),
    (["serve", "--snapshot", " "], "draxr serve: error: --snapshot: must not be empty"),
    (["serve", "--scheduler-name", ""], "draxr serve: error: --scheduler-name: must not be empty"),
    (["serve", "--allowed-writers", ""], "draxr serve: error: --allowed-writers: must not be empty"),
    (["serve", "--identity", ""], "draxr serve: error: --identity: must not be empty"),
    (["serve", "--policy", "random"], "draxr serve: error: --policy: invalid choice: 'random'"),
    (["serve", "--cel-engine", "go"], "draxr serve: error: --cel-engine: invalid choice: 'go'"),
    (
        ["serve", "--percentage-of-nodes-to-score", "101"],
        "draxr serve: error: --percentage-of-nodes-to-score: must be between 0 and 100, not 101",
    ),
    (
        ["serve", "--percentage-of-nodes-to-score", "half"],
        "draxr serve: error: --percentage-of-nodes-to-score:",
    ),
    (["serve", "--mode", "fast"], "draxr serve: error: --mode: invalid choice: 'fast'"),
    (["serve", "--apiserver-gate", "maybe"], "draxr serve: error: --apiserver-gate: invalid choice: 'maybe'"),
    (
        ["serve", "--gate-probe-interval", "0"],
        "draxr serve: error: --gate-probe-interval: must be a positive",
    ),
    (["serve", "--template-grace", "-1"], "draxr serve: error: --template-grace: must be zero or"),
    (["serve", "--binding-timeout", "0"], "draxr serve: error: --binding-timeout: must be a positive"),
    (
        ["serve", "--deployment", "Draxr_Webhook"],
        "draxr serve: error: --deployment: 'Draxr_Webhook' is not a valid DNS-1123 subdomain",
    ),
    (
        ["serve", "--leader-elect-lease-duration", "-15"],
        "draxr serve: error: --leader-elect-lease-duration: must",
    ),
    (["serve", "--pod-max-backoff-seconds", "0"], "draxr serve: error: --pod-max-backoff-seconds: must be a"),
    (["serve", "--log-level", "loud"], "draxr serve: error: --log-level: invalid choice: 'loud'"),
    (["serve", "--log-format", "xml"], "draxr serve: error: --log-format: invalid choice: 'xml'"),
    (
        ["serve", "--pod-initial-backoff-seconds", "nan"],
        "draxr serve: error: --pod-initial-backoff-seconds: must be a",
    ),
    (
        ["serve", "--leader-elect-renew-deadline", "20"],
        "draxr serve: error: --leader-elect-lease-duration (15) must be greater than "
        "--leader-elect-renew-deadline (20)",
    ),
    (
        ["serve", "--leader-elect-retry-period", "9"],
        "draxr serve: error: --leader-elect-renew-deadline (10) must be greater than 1.2 times "
        "--leader-elect-retry-period (9)",
    ),
    (
        ["serve", "--pod-max-backoff-seconds", "0.5"],
        "draxr serve: error: --pod-max-backoff-seconds (0.5) must not be less than "
        "--pod-initial-backoff-seconds (1)",
    ),
    (["serve", "--no-webhook", "--no-worker"], "draxr serve: error: --no-webhook and --no-worker together"),
    (
        ["serve", "--cert-validity", "1x"],
        "draxr serve: error: --cert-validity: '1x' is not a duration (like 90d, 12h, 1h30m, 45s)",
    ),
    (["serve", "--cert-renew-before", "0s"], "draxr serve: error: --cert-renew-before: must be a positive"),
    (
        ["serve", "--ca-validity", "-1"],
        "draxr serve: error: --ca-validity: must be a positive duration, not -1",
    ),
    (
        ["serve", "--cert-validity", "30d"],
        "draxr serve: error: --cert-renew-before (30d) must be less than --cert-validity (30d)",
    ),
    (
        ["serve", "--ca-validity", "100d"],
        "draxr serve: error: --ca-validity (100d) must be longer than --cert-validity plus "
        "--cert-renew-before (120d)",
    ),
    (
        ["serve", "--rotate-certificates=yes"],
        "draxr serve: error: --rotate-certificates: ignored explicit argument 'yes'",
    ),
    # plan
    (["plan"], "draxr plan: error: the following arguments are required: -f/--filename"),
    (["plan", "-f"], "draxr plan: error: -f/--filename: expected one argument"),
    (["plan", "-f", ""], "draxr plan: error: -f/--filename: must not be empty"),
    (["plan", "-f", "x", "-o", "xml"], "draxr plan: error: -o/--output: invalid choice: 'xml'"),
    (["plan", "-f", "x", "--policy", "random"], "draxr plan: error: --policy: invalid choice: 'random'"),
    (
        ["plan", "-f", "/nonexistent/draxr"],
        "draxr plan: error: /nonexistent/draxr: no such file or directory",
    ),
    (["plan", "-f", str(DATA / "bad" / "syntax.yaml")], "draxr plan: error: "),
    # certs
    (["certs", "--days", "-5"], "draxr certs: error: --days: must be between 1 and 3650, not -5"),
    (["certs", "--days", "ten"], "draxr certs: error: --days: must be a whole number, not 'ten'"),
    (
        ["certs", "--ip", "10.0.0.300"],
        "draxr certs: error: --ip: '10.0.0.300' is not an IPv4 or IPv6 address",
    ),
    (["certs", "--dns=-bad-"], "draxr certs: error: --dns: '-bad-' is not a valid DNS-1123 subdomain"),
    (["certs", "--service", "a.b"], "draxr certs: error: --service: 'a.b' is not a valid DNS-1123 label"),
    (["certs", "--namespace", ""], "draxr certs: error: --namespace: '' is not a valid DNS-1123 label"),
    (["certs", "--out", " "], "draxr certs: error: --out: must not be empty"),
    (["certs", "-o", "toml"], "draxr certs: error: -o/--output: invalid choice: 'toml'"),
    # manifests
    (
        ["manifests", "--namespace", "NS"],
        "draxr manifests: error: --namespace: 'NS' is not a valid DNS-1123 label",
    ),
    (["plan", "-f", "x", "--mode", "auto"], "draxr plan: error: --mode: invalid choice: 'auto'"),
    (["plan", "-f", "x", "--cel-engine", "go"], "draxr plan: error: --cel-engine: invalid choice: 'go'"),
    (
        ["plan", "-f", "x", "--percentage-of-nodes-to-score", "-1"],
        "draxr plan: error: --percentage-of-nodes-to-score: must be between 0 and 100, not -1",
    ),
    (
        ["manifests", "--webhook-url", "http://127.0.0.1"],
        "draxr manifests: error: --webhook-url: 'http://127.0.0.1': the scheme must be https",
    ),
    (["manifests", "--image", ""], "draxr manifests: error: --image: must not be empty"),
    (
        ["manifests", "--ca-bundle", "/nonexistent/ca.crt"],
        "draxr manifests: error: --ca-bundle /nonexistent/ca.crt",
    ),
    (
        ["manifests", "--cert-manager=yes"],
        "draxr manifests: error: --cert-manager: ignored explicit argument 'yes'",
    ),
    (["manifests", "--cert-dir", ""], "draxr manifests: error: --cert-dir: must not be empty"),
    (["manifests", "--ca-bundle", ""], "draxr manifests: error: --ca-bundle: must not be empty"),
    (
        ["manifests", "--cert-manager", "--ca-bundle", "ca.crt"],
        "draxr manifests: error: --cert-manager and --ca-bundle exclude each other: cert-manager injects",
    ),
    (
        ["manifests", "--cert-manager", "--cert-dir", "certs"],
        "draxr manifests: error: --cert-manager and --cert-dir exclude each other",
    ),
    (
        ["manifests", "--ca-bundle", "ca.crt", "--cert-dir", "certs"],
        "draxr manifests: error: --ca-bundle and --cert-dir exclude each other",
    ),
    (
        ["manifests", "--cert-manager", "--webhook-url", "https://127.0.0.1:9443"],
        "draxr manifests: error: --cert-manager and --webhook-url exclude each other",
    ),
    (
        ["manifests", "--failure-policy", "fail"],
        "draxr manifests: error: --failure-policy: invalid choice: 'fail'",
    ),
    (
        ["manifests", "--timeout-seconds", "31"],
        "draxr manifests: error: --timeout-seconds: must be between 1 and 30, not 31",
    ),
    (
        ["manifests", "--replicas", "0"],
        "draxr manifests: error: --replicas: must be between 1 and 100, not 0",
    ),
    (["manifests", "--route", "sometimes"], "draxr manifests: error: --route: invalid choice: 'sometimes'"),
    (
        ["manifests", "--opt-out-namespace", "Batch"],
        "draxr manifests: error: --opt-out-namespace: 'Batch' is not a valid DNS-1123 label",
    ),
    (
        ["manifests", "--opt-out-label", "a b"],
        "draxr manifests: error: --opt-out-label: 'a b' is not a valid label key",
    ),
    (
        ["manifests", "--priority-class-name", "High_Priority"],
        "draxr manifests: error: --priority-class-name: 'High_Priority' is not a valid DNS-1123 subdomain",
    ),
    (
        ["manifests", "--flow-control-shares", "0"],
        "draxr manifests: error: --flow-control-shares: must be between 1 and 1000, not 0",
    ),
    (
        ["manifests", "--network-policy=yes"],
        "draxr manifests: error: --network-policy: ignored explicit argument 'yes'",
    ),
    # validate
    (["validate"], "draxr validate: error: the following arguments are required: -f/--filename"),
    (["validate", "-f", "/nonexistent/draxr"], "draxr validate: error: /nonexistent/draxr: no such file"),
    (["validate", "-f", str(DATA / "bad" / "syntax.yaml")], "draxr validate: error: "),
    (["validate", "-f", ""], "draxr validate: error: -f/--filename: must not be empty"),
    (
        ["validate", "-f", "x", "--strict", "--kubernetes-version", "1.33"],
        "draxr validate: error: --kubernetes-version: invalid choice: '1.33'",
    ),
    # convert
    (["convert"], "draxr convert: error: the following arguments are required: -f/--filename"),
    (["convert", "-f", " "], "draxr convert: error: -f/--filename: must not be empty"),
    (["convert", "-f", "/nonexistent/draxr"], "draxr convert: error: /nonexistent/draxr: no such file"),
    (["convert", "-f", str(DATA / "bad" / "syntax.yaml")], "draxr convert: error: "),
    (["convert", "-f", "x", "--classes", ""], "draxr convert: error: --classes: must not be empty"),
    (
        ["convert", "-f", str(DATA / "good"), "--classes", "/nonexistent/classes.yaml"],
        "draxr convert: error: /nonexistent/classes.yaml: no such file or directory",
    ),
    (["convert", "-f", "x", "-o", "xml"], "draxr convert: error: -o/--output: invalid choice: 'xml'"),
    (
        ["convert", "-f", "-", "--in-place"],
        "draxr convert: error: --in-place: standard input (-f -) cannot be rewritten in place",
    ),
    (
        ["convert", "-f", "x", "--in-place", "-o", "yaml"],
        "draxr convert: error: --in-place writes each file in its own format",
    ),
]


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str], str]:
    try:
        code = main(argv)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    captured = capsys.readouterr()
    return code, captured.err.splitlines(), captured.out


@pytest.mark.parametrize(("argv", "start"), BAD_FLAGS, ids=[" ".join(a) or "(none)" for a, _ in BAD_FLAGS])
def test_a_bad_flag_or_value_fails_in_one_line(
    argv: list[str],
    start: str,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)  # certs writes nothing when refused; nothing else may either
    code, err, _ = _run(argv, capsys)
    assert code == 2
    assert len(err) == 1, err
    assert err[0].startswith(start)
    assert "Traceback" not in err[0]
    assert list(tmp_path.iterdir()) == []


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def flags_without_bad_value(
    parser: argparse.ArgumentParser, bad_flags: list[tuple[list[str], str]], shared: tuple[str, ...] = ()
) -> list[tuple[str, list[str]]]:
    """The (command, option strings) of each flag that takes a value and has no row in
    ``bad_flags`` (rows are ``([command, *words], start)``), flags whose dest is in ``shared`` aside."""
    tested = {(a[0], word.split("=")[0]) for a, _ in bad_flags if a for word in a[1:] if word.startswith("-")}
    return [
        (name, list(action.option_strings))
        for name, command in subcommands(parser).items()
        for action in command._actions
        if action.option_strings and action.nargs != 0 and action.dest != "help" and action.dest not in shared
        if not any((name, flag) in tested for flag in action.option_strings)
    ]


def test_every_command_and_flag_is_covered() -> None:
    # A flag added later must get a bad-value case here (or be a switch, which takes no value).
    parser = cli.build_parser()
    assert flags_without_bad_value(parser, BAD_FLAGS) == []
    commands = subcommands(parser)
    assert set(commands) == {a[0] for a, _ in BAD_FLAGS if a and a[0] in commands}


def test_help_is_plain_text_without_markup() -> None:
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for text in [parser.format_help(), *(c.format_help() for c in sub.choices.values())]:
        for markup in ("``", "**", ":class:", ":func:"):
            assert markup not in text


def test_an_unhandled_failure_is_one_line_not_a_traceback(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(_args: argparse.Namespace, *_rest: object) -> int:
        raise KeyError("allocation")

    monkeypatch.setattr(plan, "run", broken)
    code, err, _ = _run(["plan", "-f", "x"], capsys)
    assert code == 1
    assert err == ["draxr plan: error: KeyError: 'allocation'"]


def test_multi_line_messages_are_joined() -> None:
    assert flags.one_line("line 1:\n  detail\n") == "line 1: detail"


def test_through_a_subprocess_one_line_and_exit_2() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "webhook", "serve", "--qps", "-1"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.splitlines() == ["draxr serve: error: --qps: must be a positive number, not -1"]


def test_the_installed_cli_offers_no_demo(capsys: pytest.CaptureFixture[str]) -> None:
    """The demo runs on the API emulator, which only a checkout has (``make demo``, ``e2e/demo.py``)."""
    assert "demo" not in subcommands(cli.build_parser())
    code, _, out = _run(["--help"], capsys)
    assert code == 0
    assert "serve" in out
    assert "demo" not in out
    code, err, _ = _run(["demo"], capsys)
    assert code == 2
    assert err[0].startswith("draxr: error: COMMAND: invalid choice: 'demo'")
