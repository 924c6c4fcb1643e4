"""One scheduling decision in kube-scheduler's phases: the special claim's requests and mappings, the
filter plugins, scores, which nodes a decision visits, and the scheduler that runs them."""
