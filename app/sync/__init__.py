"""Sources that feed ClusterState: a snapshot file (the embedded default) and, later, list+watch."""
