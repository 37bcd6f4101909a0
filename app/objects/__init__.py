"""Kubernetes and Kueue objects decoded once, at the edge, into small typed records."""
