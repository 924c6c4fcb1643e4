"""Exact upstream constants (resource.k8s.io and the DynamicResources scheduler plugin)."""

from typing import Final

#: Annotation that marks the special ResourceClaim; its single valid value is "true".
EXTENDED_RESOURCE_CLAIM_ANNOTATION: Final = "resource.kubernetes.io/extended-resource-claim"
#: On a claim the resourceclaim controller made from a template: the pod claim it is for.
POD_CLAIM_NAME_ANNOTATION: Final = "resource.kubernetes.io/pod-claim-name"
#: Implicit extended resource name prefix of every DeviceClass.
DEVICE_CLASS_PREFIX: Final = "deviceclass.resource.kubernetes.io/"
#: Finalizer that protects an allocated claim from deletion.
DELETE_PROTECTION_FINALIZER: Final = "resource.kubernetes.io/delete-protection"
#: Suffix of the special claim's generateName: ``<pod>-extended-resources-``.
SPECIAL_CLAIM_GENERATE_SUFFIX: Final = "-extended-resources-"
#: In-memory name upstream gives the special claim before it exists (deliberately invalid).
SPECIAL_CLAIM_IN_MEMORY_NAME: Final = "<extended-resources>"
#: Format of the special claim's request names.
REQUEST_NAME_FORMAT: Final = "container-{container}-request-{request}"

#: ``AllocationResultsMaxSize``: at most this many devices per claim.
ALLOCATION_RESULTS_MAX_SIZE: Final = 32
#: ``ResourceSliceMaxAttributeValuesPerDevice`` (list-typed attributes, KEP-5491).
MAX_ATTRIBUTE_VALUES_PER_DEVICE: Final = 32
#: ``CELSelectorExpressionMaxLength``.
CEL_SELECTOR_MAX_LENGTH: Final = 10 * 1024

#: On a DeviceClass: the extended resource name, where the apiserver drops ``spec.extendedResourceName``
#: (``DRAExtendedResource`` off). Same syntax and uniqueness; the field wins when both agree.
EXTENDED_RESOURCE_NAME_ANNOTATION: Final = "draxr.io/extended-resource-name"

#: On a DeviceClass: a JSON list of DeviceTolerations (resource.k8s.io/v1) put on every request draxr
#: writes for the class's extended resource (the special claim's, the rewrite's templates'), so that
#: devices with a NoSchedule or NoExecute taint can serve such pods (upstream gives them none).
EXTENDED_RESOURCE_TOLERATIONS_ANNOTATION: Final = "draxr.io/extended-resource-tolerations"

#: The apiserver gate probe's DeviceClasses (dry runs, never stored) are named so; the DeviceClass
#: hook's matchConditions skip them, so the probe never waits for draxr's own webhook.
GATE_PROBE_PREFIX: Final = "draxr-gate-probe-"

#: draxr's own annotation on routed pods: JSON map of resource name to resolved DeviceClass.
DRAXR_RESOURCES_ANNOTATION: Final = "draxr.io/extended-resources"
DEFAULT_SCHEDULER_NAME: Final = "draxr"

RESOURCE_API_VERSION: Final = "resource.k8s.io/v1"
#: draxr's mark on the special claims its worker writes (the scheduler name that wrote them).
WRITER_ANNOTATION: Final = "draxr.io/scheduler"
