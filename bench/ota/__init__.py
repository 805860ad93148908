"""Model updates over CoAP block-wise transfer: store, manifests, deltas, update server, impairment proxy."""
