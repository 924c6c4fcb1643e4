"""The allocation worker: kube-scheduler's work for KEP-5004 pods, against the Kubernetes API."""
