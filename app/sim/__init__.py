"""`quotient simulate`: a simulated kube-scheduler driving the real HTTP routes."""
