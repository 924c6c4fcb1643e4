"""kube-scheduler's plugins, one module (or folder) each, named as upstream names them
(``pkg/scheduler/framework/plugins/<name>``); each offers its phases as functions on plain dicts."""
