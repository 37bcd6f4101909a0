"""The only code that writes to the cluster: bindings, evictions, pod conditions."""
