"""Pure KEP-5004 semantics: nothing in this package performs I/O, reads a clock or starts a thread.

Layers, bottom first (each imports only itself and the ones below; ``tests/test_layers.py`` checks):

``api``         the API's shapes and rules: objects, names, quantities, field errors, versions, validation
``cel``         CEL over devices (DeviceClass and request selectors)
``cluster``     the cluster model: nodes, classes, slices, devices, topology, what is allocated, free counts
``allocation``  the structured allocator, the placement it records, the claims KEP-5004 writes
``scheduling``  one decision in kube-scheduler's phases: request mappings, the filter plugins, scores
``paths``       which path a pod takes (native, rewrite, device plugin), the rewrite, quota
"""
