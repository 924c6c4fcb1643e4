"""The paths of a pod asking for DRA-backed extended resources: the names it asks for and the classes
backing them (``requested``), which path it takes (``choice``: native, rewrite, device plugin), the
rewrite into ordinary claims (``rewrite``, KEP-5004's "Option 1"), ``--route`` (``routing``), the
JSONPatch of each path (``patch``), what its author is told (``explain``), quota (``quota``), and the
whole admission outcome from what the cluster says (``outcome``)."""
