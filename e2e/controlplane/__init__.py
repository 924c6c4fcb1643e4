"""A real control plane (etcd + kube-apiserver, built from Go modules) for e2e tests."""
