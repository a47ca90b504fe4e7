"""Which pod holds which device, as the kubelet says: its PodResources API.

The port (`PodResourcesSource`, model.py), its gRPC client over the kubelet's unix socket,
rate limited and retrying by agent/backoff.py's rule (client.py), and one error tree
(errors.py). The simulated cluster answers the same port. The agent's lowest layer: it imports
nothing of the agent but the backoff rule.
"""
