"""ClusterState: what Quotient knows of the cluster, kept current by sync/ and by committed decisions."""
