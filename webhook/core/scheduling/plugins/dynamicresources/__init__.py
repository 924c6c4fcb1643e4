"""DynamicResources: the special claim and the pod's own claims, allocated together (KEP-5004).

``mappings``  the special claim's requests and the pod's request mappings (``createRequestsAndMappings``)
``state``     what PreFilter learns (``DraState``) and the views Filter and Score fill (``DraViews``)
``prefilter`` the pod's claims, its special claim, which names a class backs, draxr's alignment
``filter``    which names DRA serves on a node, the device counts and alignment precheck
``allocate``  the allocation of the user claims and the special claim in one call
``score``     the device counts a node's score reads
"""
