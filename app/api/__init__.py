"""HTTP face of Quotient: the extender verbs kube-scheduler calls, health, and debugging."""
