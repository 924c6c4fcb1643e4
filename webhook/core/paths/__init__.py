"""The paths of a pod asking for DRA-backed extended resources: which one it takes (native, rewrite,
device plugin), the rewrite into ordinary claims (KEP-5004's "Option 1"), and quota."""
