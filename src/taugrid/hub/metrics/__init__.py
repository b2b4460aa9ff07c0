"""The hub's Prometheus metrics (state, cost) and the GPU utilisation history."""
