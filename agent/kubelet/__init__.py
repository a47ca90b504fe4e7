"""agent/kubelet."""
