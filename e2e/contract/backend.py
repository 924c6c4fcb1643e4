"""What a contract test talks to: the API emulator or a real kube-apiserver, the same way.

Each test gets an ``Api``: a namespace of its own (with the ``default`` ServiceAccount the
ServiceAccount admission plugin wants before it admits a pod, and on the real apiserver an RBAC role
letting the non-admin users do anything there), official clients and raw HTTP as each user of
``e2e.controlplane.launcher.USERS`` (the emulator gets the same names and groups as tokens), and a
kubeconfig for kubectl. Cluster-scoped names a test makes are its own (``unique``).

The emulator is fresh for every test. The real apiserver (etcd + kube-apiserver, no
kube-controller-manager) serves the whole session: after a test its webhook configurations and
DeviceClasses are deleted; its namespaces stay, terminating (no namespace controller). A real
apiserver applies a webhook configuration a moment after it is written: ``hooks_changed`` waits
until it has (the emulator applies it at once).
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import urllib3
from kubernetes import client, config

from ..controlplane.launcher import USERS, ControlPlane
from ..emulator import Emulator
from .webhook_server import WebhookServer

#: The webhook configurations ``hooks_changed`` writes to see the apiserver catch up.
SENTINEL = "contract-sentinel"
PROBE_LABEL = "contract-probe"
#: Each kind of webhook configuration, as the official client's method names spell it.
HOOKS = {"mutating": "mutating_webhook_configuration", "validating": "validating_webhook_configuration"}


class Api:
    """One test's backend; ``real`` tells which (for the rare assertion only one side can make)."""

    real: bool = False
    name = ""

    def __init__(self, hooks: WebhookServer, tmp: Path) -> None:
        self.hooks = hooks
        self.tmp = tmp
        self.suffix = uuid.uuid4().hex[:6]
        self.namespace = f"c-{self.suffix}"
        self._clients: list[Any] = []

    # -- clients -----------------------------------------------------------------------------------

    def _api_client(self, user: str) -> Any:
        raise NotImplementedError

    def client(self, user: str = "admin") -> Any:
        """A ``kubernetes.client.ApiClient`` as ``user`` (a key of ``USERS``), closed after the test."""
        api = self._api_client(user)
        self._clients.append(api)
        return api

    def core(self, user: str = "admin") -> Any:
        return client.CoreV1Api(self.client(user))

    def http(
        self,
        method: str,
        path: str,
        body: Any = None,
        headers: dict[str, str] | None = None,
        user: str = "admin",
    ) -> urllib3.BaseHTTPResponse:
        """One raw request as ``user``; ``body`` is sent as JSON unless it is bytes."""
        data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
        all_headers = {**self._auth(user), **(headers or {})}
        return self._pool(user).request(method, self.url + path, body=data, headers=all_headers)

    def _pool(self, user: str) -> urllib3.PoolManager:
        raise NotImplementedError

    def _auth(self, user: str) -> dict[str, str]:
        return {}

    def kubeconfig(self, user: str = "admin") -> Path:
        raise NotImplementedError

    @property
    def url(self) -> str:
        raise NotImplementedError

    @staticmethod
    def user_info(user: str) -> dict[str, Any]:
        """``username`` and ``groups`` as an admission webhook sees ``user``."""
        u = USERS[user]
        return {"username": u.name, "groups": [*u.groups, "system:authenticated"]}

    # -- namespaces and names ----------------------------------------------------------------------

    def unique(self, name: str) -> str:
        """A cluster-scoped name of this test's own."""
        return f"{name}-{self.suffix}"

    def new_namespace(self, name: str, labels: dict[str, str] | None = None) -> str:
        """Another namespace of this test's (``unique(name)``) where pods can be created."""
        ns = self.unique(name)
        self._namespace(ns, labels)
        return ns

    def _namespace(self, ns: str, labels: dict[str, str] | None = None) -> None:
        core = self.core()
        meta: dict[str, Any] = {"name": ns, **({"labels": labels} if labels else {})}
        core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": meta})
        core.create_namespaced_service_account(ns, {"metadata": {"name": "default"}})

    def hooks_changed(self) -> None:
        """Return once webhook configurations written before are what the apiserver applies."""

    def start(self) -> Api:
        self._namespace(self.namespace)
        return self

    def stop(self) -> None:
        for api in self._clients:
            api.close()


class EmulatorApi(Api):
    name = "emulator"

    def __init__(self, hooks: WebhookServer, tmp: Path) -> None:
        super().__init__(hooks, tmp)
        tokens = {key: (u.name, list(u.groups)) for key, u in USERS.items()}
        self.em = Emulator(tokens=tokens, bookmark_interval=0.2)
        self._http = urllib3.PoolManager()

    @property
    def url(self) -> str:
        return self.em.url

    def _api_client(self, user: str) -> Any:
        return self.em.api_client(user)

    def _pool(self, user: str) -> urllib3.PoolManager:
        return self._http

    def _auth(self, user: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {user}"}

    def kubeconfig(self, user: str = "admin") -> Path:
        return self.em.kubeconfig(self.tmp / f"kubeconfig-{user}", token=user, namespace=self.namespace)

    def start(self) -> Api:
        self.em.start()
        return super().start()

    def stop(self) -> None:
        super().stop()
        self.em.stop()


class ApiserverApi(Api):
    name = "apiserver"
    real = True
    _generation = 0  # of the sentinels, for the session

    def __init__(self, cp: ControlPlane, hooks: WebhookServer, tmp: Path) -> None:
        super().__init__(hooks, tmp)
        self.cp = cp
        self._pools: dict[str, urllib3.PoolManager] = {}

    @property
    def url(self) -> str:
        return self.cp.url

    def _api_client(self, user: str) -> Any:
        return config.new_client_from_config(config_file=str(self.cp.kubeconfig_path(user)))  # type: ignore[no-untyped-call]

    def _pool(self, user: str) -> urllib3.PoolManager:
        if user not in self._pools:
            cert, key = self.cp.cert_paths(user)
            self._pools[user] = urllib3.PoolManager(
                ca_certs=str(self.cp.ca_path), cert_file=str(cert), key_file=str(key)
            )
        return self._pools[user]

    def kubeconfig(self, user: str = "admin") -> Path:
        return self.cp.kubeconfig_path(user)

    def _namespace(self, ns: str, labels: dict[str, str] | None = None) -> None:
        """Also lets every user do anything in the namespace (``edit`` would need kube-controller-
        manager's ClusterRole aggregation, which does not run here)."""
        super()._namespace(ns, labels)
        rbac: Any = client.RbacAuthorizationV1Api(self.client())
        everything = [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]
        rbac.create_namespaced_role(ns, {"metadata": {"name": "contract-all"}, "rules": everything})
        binding = {
            "metadata": {"name": "contract-all"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "contract-all"},
            "subjects": [
                {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": USERS[u].name}
                for u in USERS
                if u != "admin"
            ],
        }
        rbac.create_namespaced_role_binding(ns, binding)

    def hooks_changed(self) -> None:
        """Rewrite a sentinel webhook of each kind to point at a new ``/probe`` path, then send dry-run
        ConfigMaps it matches until both sentinels answered with that path: the apiserver's view of
        each kind of configuration is then at least as new as anything written before."""
        ApiserverApi._generation += 1
        gen = str(ApiserverApi._generation)
        admission = client.AdmissionregistrationV1Api(self.client())
        for kind, singular in HOOKS.items():
            hook = {
                "name": "sentinel.contract.test.io",
                "clientConfig": {
                    "url": self.hooks.url(f"/probe/{kind}/{gen}"),
                    "caBundle": self.hooks.tls.ca_bundle,
                },
                "rules": [
                    {
                        "operations": ["CREATE"],
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "resources": ["configmaps"],
                    }
                ],
                "objectSelector": {"matchLabels": {PROBE_LABEL: "true"}},
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
                "failurePolicy": "Ignore",
                "timeoutSeconds": 5,
            }
            body: dict[str, Any] = {"metadata": {"name": SENTINEL}, "webhooks": [hook]}
            try:
                current = getattr(admission, f"read_{singular}")(SENTINEL)
            except client.ApiException as e:
                if e.status != 404:
                    raise
                getattr(admission, f"create_{singular}")(body)
                continue
            body["metadata"]["resourceVersion"] = current.metadata.resource_version  # no blind updates
            getattr(admission, f"replace_{singular}")(SENTINEL, body)
        probe = {"metadata": {"generateName": "probe-", "labels": {PROBE_LABEL: "true"}}}
        core = self.core()
        deadline, pause = time.monotonic() + 30, 0.02
        # Nothing to wait on: the apiserver's informer gives no signal. Each probe is one round trip.
        while True:
            core.create_namespaced_config_map(self.namespace, probe, dry_run="All")
            seen = {(r.get("kind"), r.get("gen")) for r in self.hooks.log("/probe")}
            if {(k, gen) for k in HOOKS} <= seen:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"the apiserver did not pick up webhook configurations within 30 s ({gen})"
                )
            time.sleep(pause)
            pause = min(pause * 2, 0.5)

    def stop(self) -> None:
        """Delete what the next test must not see: webhook configurations, DeviceClasses."""
        admission = client.AdmissionregistrationV1Api(self.client())
        changed = False
        for singular in HOOKS.values():
            for item in getattr(admission, f"list_{singular}")().items:
                if item.metadata.name != SENTINEL:
                    getattr(admission, f"delete_{singular}")(item.metadata.name)
                    changed = True
        if changed:
            self.hooks_changed()
        resource: Any = client.ResourceV1Api(self.client())
        for dc in resource.list_device_class().items:
            if dc.metadata.name.endswith(self.suffix):
                resource.delete_device_class(dc.metadata.name)
        super().stop()
        for pool in self._pools.values():
            pool.clear()
