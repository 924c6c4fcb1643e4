"""The thin layer between draxr and the Kubernetes API: plain-dict requests over the official
``kubernetes`` client's ``ApiClient`` (its config, auth and TLS), informers, leader election."""
