"""The cluster as the engine sees it: nodes (NodeInfo), DeviceClasses, ResourceSlices and their
pools, the device index, topology groups, what is allocated or in flight, and free-device counts."""
