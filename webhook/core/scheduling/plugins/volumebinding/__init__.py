"""VolumeBinding: the pod's PersistentVolumeClaims bound, matched to an available volume, or
provisioned on the chosen node (upstream ``volumebinding`` and its ``volumeBinder``).

``claims``   PreFilter: the pod's claims, bound, unbound waiting for their first consumer, or unbound
             immediate ones (which fail the pod), and the volumes of the waiting claims' classes
``binder``   Filter: bound volumes' node affinity; for each waiting claim an available volume on
             the node (static binding) or provisioning there (the class's allowed topologies, the
             driver's CSIStorageCapacity)
``score``    Score (``StorageCapacityScoring``, beta and on in 1.37): how full the chosen volumes or
             the node's storage capacity would be
``plugin``   the profile's Filter and Score plugins; Reserve records the node's ``PodVolumes`` on the
             decision, which ``ClusterState.reserve`` assumes
``prebind``  what PreBind writes (the PV's ``claimRef``, the claim's selected node) as JSON merge
             patches, and the check PreBind repeats until the PV controller has bound every claim
"""
