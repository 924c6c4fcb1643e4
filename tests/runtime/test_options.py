"""``ServeOptions``: each component's settings nested under it, set whole or one by one by their flat
(flag) names; a setting's value and help read from the field that holds it."""

from __future__ import annotations

import datetime as dt
from dataclasses import fields

import pytest

from webhook.admission.config import AdmissionConfig
from webhook.kube.leader import LeaderElection
from webhook.runtime.options import FLAT, ServeOptions
from webhook.worker.config import WorkerConfig


def test_a_flat_name_sets_its_components_setting() -> None:
    opts = ServeOptions(qps=200.0, lease_duration=30.0, template_grace=5.0, log_format="json")
    assert (opts.client.qps, opts.leader_election.lease_duration) == (200.0, 30.0)
    assert (opts.scheduling.template_grace, opts.logs.format) == (5.0, "json")
    assert opts.client.burst == ServeOptions().client.burst  # the rest keep their defaults


def test_the_scheduler_name_is_the_webhooks_and_the_workers() -> None:
    opts = ServeOptions(scheduler_name="other")
    assert (opts.admission.scheduler_name, opts.scheduling.scheduler_name) == ("other", "other")


def test_flat_names_apply_on_top_of_whole_groups() -> None:
    opts = ServeOptions(scheduling=WorkerConfig(policy="spread", bind_workers=2), bind_workers=4)
    assert (opts.scheduling.policy, opts.scheduling.bind_workers) == ("spread", 4)


def test_flat_values_take_their_fields_shape() -> None:
    assert ServeOptions(allowed_writers=["u1", "u2"]).admission.allowed_writers == frozenset({"u1", "u2"})
    assert ServeOptions(lease_namespace="ops").namespace == "ops"


def test_an_unknown_name_is_refused_as_a_constructor_would() -> None:
    with pytest.raises(TypeError, match="'lease_time'"):
        ServeOptions(lease_time=3.0)


def test_the_defaults_are_the_components_own() -> None:
    opts = ServeOptions()
    assert opts.leader_election == LeaderElection()
    assert opts.admission == AdmissionConfig()
    assert opts.scheduling == WorkerConfig()
    assert opts.tls.validity == dt.timedelta(days=90)


def test_every_flat_name_leads_to_a_field() -> None:
    opts = ServeOptions()
    for name in FLAT:
        value, _ = opts.setting(name)
        opts.set(name, value)  # what a flag at its default does
    assert opts == ServeOptions()


def test_a_setting_is_read_with_its_help() -> None:
    opts = ServeOptions(qps=7.0)
    assert opts.setting("qps") == (7.0, "client-side write rate limit")
    assert opts.setting("lease_name")[1] is None  # no help
    assert opts.setting("namespace")[0] == opts.namespace
    assert {f.name for f in fields(opts)} >= {"server", "tls", "client", "leader_election", "gate", "logs"}


def test_binding_timeout_defaults_to_upstreams_600_seconds() -> None:
    assert ServeOptions().scheduling.binding_timeout == 600.0
    assert ServeOptions(binding_timeout=30.0).scheduling.binding_timeout == 30.0
